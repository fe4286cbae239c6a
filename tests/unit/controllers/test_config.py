"""One flag set for both programs (``controllers.config``): the API server and
``python -m controllers`` parse the controllers' flags alike into the same ``Settings``; the old
``--workers`` of ``python -m controllers`` still sets the resolver's concurrency and says it is
now ``--resolver-concurrency``; the leader-election defaults have one owner."""

from __future__ import annotations

import pathlib
import subprocess
import sys

import pytest

from apiserver.flags import cli
from controllers import __main__ as program
from controllers import config
from controllers.runtime import leader

REPO = pathlib.Path(__file__).resolve().parents[3]


def _process(argv: list[str]) -> config.Settings:
    return config.from_args(program.parser().parse_args(argv))


def _server(tmp_path: pathlib.Path, argv: list[str]) -> config.Settings:
    return cli.parse(["--standalone", "--data-dir", str(tmp_path), *argv]).controller_settings


def test_both_programs_build_the_same_settings(tmp_path: pathlib.Path) -> None:
    argv = ["--resolver-concurrency", "3", "--node", "node-a=https://10.0.0.5:32444/",
            "--node", "node-b", "--plugin-ca-file", "/ca.crt", "--namespace", "models",
            "--leader-elect-lease-duration", "20s", "--revalidate-interval", "6h",
            "--secrets-dir", str(tmp_path / "secrets")]
    process, server = _process(argv), _server(tmp_path, argv)
    assert process == server
    assert process.resolver_concurrency == 3
    assert process.nodes == (("node-a", "https://10.0.0.5:32444"), ("node-b", ""))
    assert process.plugin_urls == (("node-a", "https://10.0.0.5:32444"),)
    assert (process.namespace, process.plugin_namespace) == ("models", "models")
    assert process.lease == leader.Timing(lease_duration=20.0)
    assert process.secrets_dir == (tmp_path / "secrets").resolve()


def test_the_defaults_are_the_settings_defaults(tmp_path: pathlib.Path) -> None:
    namespace = config.default_namespace()  # $POD_NAMESPACE, else gpustack-system
    assert _process([]) == config.Settings(namespace=namespace, plugin_namespace=namespace)
    assert _process([]).lease == leader.Timing()
    assert _process([]).resolver_concurrency == config.DEFAULT_RESOLVER_CONCURRENCY
    # the server's --processes (and its old name --workers) is its processes, never the
    # resolver's concurrency
    for flag in ("--processes", "--workers"):
        settings = cli.parse(["--standalone", "--data-dir", str(tmp_path), flag, "2"])
        assert settings.storage.processes == 2
        assert settings.controller_settings.resolver_concurrency == 8


def test_the_old_workers_flag_sets_the_concurrency_and_is_reported() -> None:
    args = program.parser().parse_args(["--workers", "5"])
    assert config.from_args(args).resolver_concurrency == 5
    assert config.renamed(args) == [
        "--workers is now --resolver-concurrency; the old name goes in a later release"]
    assert config.renamed(program.parser().parse_args(["--resolver-concurrency", "5"])) == []
    assert "--workers" not in program.parser().format_help()
    # the program logs it once logging is set up (then fails here: no such kubeconfig)
    done = subprocess.run(
        [sys.executable, "-m", "controllers", "--workers", "5", "--kubeconfig", "/nonexistent"],
        cwd=REPO, capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 2, done.stderr
    assert "WARNING controllers: --workers is now --resolver-concurrency" in done.stderr


@pytest.mark.parametrize(("argv", "message"), [
    (["--node", "Node_A"], "'Node_A': the node name must be a DNS subdomain"),
    (["--node", "node-a=http://10.0.0.5"], "node-a: the plugin URL must start with https://"),
    (["--resolver-concurrency", "0"], "0 must be at least 1"),
    (["--leader-elect-lease-duration", "10s", "--leader-elect-renew-deadline", "10s"],
     "the renew deadline must be shorter than the lease duration"),
])
def test_both_programs_refuse_alike(tmp_path: pathlib.Path, argv: list[str], message: str,
                                    capsys: pytest.CaptureFixture[str]) -> None:
    for parse in (lambda: program.main(argv), lambda: _server(tmp_path, argv)):
        with pytest.raises(SystemExit) as exited:
            parse()
        assert exited.value.code == 2
        assert message in capsys.readouterr().err


def test_a_flag_of_the_controllers_is_added_once() -> None:
    """Both parsers take ``add_flags`` whole: a flag the server or the program also defined
    would make argparse refuse the parser (a conflict), so building them is the check."""
    for build in (program.parser, cli.parser):
        spelled = build()._option_string_actions
        assert "--resolver-concurrency" in spelled and "--node" in spelled
