"""Build the model-manager image (and the test registrar image) as OCI archives, without a
container builder or a registry.

The recipe is ``images/Containerfile``; this script takes the same steps by hand so that
``make image`` works on a machine with only Debian's ``mmdebstrap``:

1. ``FROM ${BASE}`` + the ``apt-get install`` step: ``mmdebstrap`` makes a Debian root
   filesystem with ``python3``, ``python3-venv`` and ``ca-certificates`` (no docs, no apt lists).
2. The ``nonroot`` user (65532) and the virtualenv ``/opt/model-manager`` with the locked
   dependencies (``images/requirements.lock``), pip running inside the root filesystem.
3. The project itself, ``pip install --no-deps --target /opt/model-manager/app``, compiled to
   hash-checked ``.pyc`` (the root filesystem is read-only at run time).

Each step is one layer. Steps 1-2 are cached under ``--cache`` keyed by a hash of their inputs
(this script, the Containerfile, the lock, the Debian suite), so a rebuild after a source change
only redoes step 3. The archive holds an OCI layout (``index.json``) for
``ctr -n k8s.io images import`` / ``skopeo copy oci-archive:``, and a ``manifest.json`` so that
``docker load`` takes it too.

    python images/build.py image --out .local/images   # model-manager-<appVersion>.oci.tar
    python images/build.py registrar --binary ...      # the tests' node-driver-registrar image
    python images/build.py lock                         # rewrite requirements.lock from .venv
"""

from __future__ import annotations

import argparse
import dataclasses
import gzip
import hashlib
import io
import json
import os
import pathlib
import re
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time
import tomllib
from collections.abc import Iterator, Sequence
from importlib import metadata
from typing import Any

HERE = pathlib.Path(__file__).resolve().parent
REPO = HERE.parent
CONTAINERFILE = HERE / "Containerfile"
LOCK = HERE / "requirements.lock"
CHART = REPO / "charts" / "model-manager" / "Chart.yaml"
REPOSITORY = "docker.io/gpustack/model-manager"
REGISTRAR = "localhost/model-manager-test/csi-node-driver-registrar"
SUITE = os.environ.get("IMAGE_SUITE", "bookworm")
MIRROR = os.environ.get("IMAGE_MIRROR", "http://deb.debian.org/debian")
# libstdc++6: grpcio's wheel links it
PACKAGES = ("python3", "python3-venv", "ca-certificates", "libstdc++6")
VENV = "opt/model-manager"
APP = f"{VENV}/app"
UID = 65532
PATH = f"/{VENV}/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
PYPROJECT = REPO / "pyproject.toml"
EPOCH = "1970-01-01T00:00:00Z"
LAYER = "application/vnd.oci.image.layer.v1.tar+gzip"


def sources() -> list[str]:
    """The packages setuptools finds (pyproject's ``tool.setuptools.packages.find``) that exist
    here, copied for pip: one list, so a new package reaches the image without an edit here."""
    found = tomllib.loads(PYPROJECT.read_text())["tool"]["setuptools"]["packages"]["find"]
    tops = {pattern.removesuffix("*").rstrip(".") for pattern in found["include"]}
    packages = sorted(t for t in tops if (REPO / t / "__init__.py").exists())
    copied = set(re.findall(r"^COPY (\S+) /src/\1$", CONTAINERFILE.read_text(), re.M))
    if copied != set(packages):
        raise SystemExit(f"{CONTAINERFILE} copies {sorted(copied)} but pyproject's packages are "
                         f"{packages}: keep its COPY lines in step")
    return packages


def log(message: str) -> None:
    print(f"[image] {message}", file=sys.stderr, flush=True)


def app_version() -> str:
    found = re.search(r'^appVersion:\s*"?([^"\s]+)"?', CHART.read_text(), re.M)
    if found is None:
        raise SystemExit(f"no appVersion in {CHART}")
    return found.group(1)


# --- layers -------------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class Layer:
    blob: pathlib.Path  # gzip of the tar
    digest: str  # sha256 of the blob
    diff_id: str  # sha256 of the uncompressed tar
    size: int  # blob bytes
    unpacked: int  # uncompressed tar bytes
    created_by: str


class _Hashing(io.RawIOBase):
    """A write-only stream that hashes and counts what passes through it to ``sink``."""

    def __init__(self, sink: Any) -> None:
        self.sink, self.hash, self.count = sink, hashlib.sha256(), 0

    def writable(self) -> bool:
        return True

    def tell(self) -> int:
        return self.count

    def write(self, data: Any) -> int:
        view = memoryview(data)
        self.hash.update(view)
        self.count += len(view)
        self.sink.write(view)
        return len(view)


def _walk(root: pathlib.Path, prefix: str, skip: Sequence[str]) -> Iterator[tuple[str, str]]:
    """(path on disk, name in the tar) for ``root/prefix`` and below, sorted, minus ``skip``
    (paths relative to root whose contents, not the directory itself, are left out)."""
    start = root / prefix if prefix else root
    stack = [start]
    while stack:
        here = stack.pop()
        rel = here.relative_to(root).as_posix()
        name = "." if rel == "." else rel
        yield str(here), name
        if here.is_dir() and not here.is_symlink() and rel not in skip:
            stack.extend(sorted(here.iterdir(), reverse=True))


def write_layer(root: pathlib.Path, out: pathlib.Path, *, include: Sequence[str] = ("",),
                skip: Sequence[str] = (), parents: bool = True, created_by: str) -> Layer:
    """A gzip'd tar of ``root``'s paths ``include`` (with their parent directories), leaving
    out the contents of ``skip``. Owners, modes, mtimes, hard links and devices are kept."""
    with out.open("wb") as raw:
        blob = _Hashing(raw)
        with gzip.GzipFile(fileobj=blob, mode="wb", compresslevel=1, mtime=0) as zipped:
            diff = _Hashing(zipped)
            with tarfile.open(fileobj=diff, mode="w", format=tarfile.PAX_FORMAT) as tar:
                seen: set[str] = set()
                for prefix in include:
                    if parents and prefix:
                        parts = prefix.split("/")[:-1]
                        for i in range(1, len(parts) + 1):
                            parent = "/".join(parts[:i])
                            if parent not in seen:
                                seen.add(parent)
                                tar.add(root / parent, arcname=parent, recursive=False)
                    for path, name in _walk(root, prefix, skip):
                        if name in seen:
                            continue
                        seen.add(name)
                        tar.add(path, arcname=name, recursive=False, filter=_owner)
    return Layer(out, "sha256:" + blob.hash.hexdigest(), "sha256:" + diff.hash.hexdigest(),
                 blob.count, diff.count, created_by)  # fmt: skip


def _owner(info: tarfile.TarInfo) -> tarfile.TarInfo:
    info.uname = info.gname = ""
    return info


def file_layer(out: pathlib.Path, entries: Sequence[tuple[str, bytes | None, int]], *,
               created_by: str) -> Layer:
    """A layer of literal entries (name, content or None for a directory, mode)."""
    with tempfile.TemporaryDirectory() as scratch:
        root = pathlib.Path(scratch)
        for name, content, mode in entries:
            path = root / name
            if content is None:
                path.mkdir(parents=True, exist_ok=True)
            else:
                path.parent.mkdir(parents=True, exist_ok=True)
                path.write_bytes(content)
            path.chmod(mode)
            os.utime(path, (0, 0))
        for path in root.rglob("*"):
            os.utime(path, (0, 0), follow_symlinks=False)
        return write_layer(root, out, include=[e[0] for e in entries], parents=False,
                           created_by=created_by)


# --- the archive --------------------------------------------------------------------------------


def _blob(tar: tarfile.TarFile, data: bytes) -> str:
    digest = hashlib.sha256(data).hexdigest()
    info = tarfile.TarInfo(f"blobs/sha256/{digest}")
    info.size, info.mode = len(data), 0o644
    tar.addfile(info, io.BytesIO(data))
    return "sha256:" + digest


def _json(value: object) -> bytes:
    return json.dumps(value, sort_keys=True, separators=(",", ":")).encode()


def write_archive(out: pathlib.Path, reference: str, layers: Sequence[Layer],
                  config: dict[str, Any]) -> int:
    """An OCI image layout tar naming ``reference`` (containerd's ``io.containerd.image.name``
    and the tag as ``org.opencontainers.image.ref.name``), plus docker's ``manifest.json``."""
    image = {"architecture": "amd64", "os": "linux", "created": EPOCH, "config": config,
             "rootfs": {"type": "layers", "diff_ids": [layer.diff_id for layer in layers]},
             "history": [{"created": EPOCH, "created_by": layer.created_by}
                         for layer in layers]}  # fmt: skip
    config_bytes = _json(image)
    partial = out.with_suffix(".partial")
    with tarfile.open(partial, "w") as tar:
        layout = tarfile.TarInfo("blobs/sha256")
        layout.type, layout.mode = tarfile.DIRTYPE, 0o755
        tar.addfile(layout)
        config_digest = _blob(tar, config_bytes)
        for layer in layers:
            tar.add(layer.blob, arcname=f"blobs/sha256/{layer.digest.split(':')[1]}")
        manifest = {"schemaVersion": 2, "mediaType": "application/vnd.oci.image.manifest.v1+json",
                    "config": {"mediaType": "application/vnd.oci.image.config.v1+json",
                               "digest": config_digest, "size": len(config_bytes)},
                    "layers": [{"mediaType": LAYER, "digest": layer.digest, "size": layer.size}
                               for layer in layers]}  # fmt: skip
        manifest_bytes = _json(manifest)
        manifest_digest = _blob(tar, manifest_bytes)
        tag = reference.rsplit(":", 1)[1]
        names = {"io.containerd.image.name": reference, "org.opencontainers.image.ref.name": tag}
        index = {"schemaVersion": 2, "mediaType": "application/vnd.oci.image.index.v1+json",
                 "manifests": [{"mediaType": manifest["mediaType"], "digest": manifest_digest,
                                "size": len(manifest_bytes),
                                "annotations": names}]}  # fmt: skip
        docker = [{"Config": f"blobs/sha256/{config_digest.split(':')[1]}",
                   "RepoTags": [reference.removeprefix("docker.io/")],
                   "Layers": [f"blobs/sha256/{layer.digest.split(':')[1]}"
                              for layer in layers]}]  # fmt: skip
        for name, data in (("oci-layout", b'{"imageLayoutVersion":"1.0.0"}'),
                           ("index.json", _json(index)), ("manifest.json", _json(docker))):
            info = tarfile.TarInfo(name)
            info.size, info.mode = len(data), 0o644
            tar.addfile(info, io.BytesIO(data))
    partial.replace(out)
    return sum(layer.unpacked for layer in layers)


# --- model-manager ------------------------------------------------------------------------------


def base_key() -> str:
    digest = hashlib.sha256()
    for path in (pathlib.Path(__file__), CONTAINERFILE, LOCK):
        digest.update(path.read_bytes())
    digest.update(f"{SUITE} {MIRROR} {PACKAGES}".encode())
    return digest.hexdigest()[:16]


def build_base(cache: pathlib.Path) -> list[Layer]:
    """Steps 1-2 (Debian + the locked virtualenv), from the cache when their inputs are
    unchanged."""
    key = base_key()
    where = cache / f"base-{key}"
    record = where / "layers.json"
    if record.exists():
        log(f"base and dependency layers from the cache ({where})")
        return [Layer(**{**item, "blob": where / item["blob"]})
                for item in json.loads(record.read_text())]  # fmt: skip
    if shutil.which("mmdebstrap") is None:
        raise SystemExit("mmdebstrap is not installed: apt-get install mmdebstrap")
    if cache.exists():
        for stale in cache.glob("base-*"):
            shutil.rmtree(stale, ignore_errors=True)
    where.mkdir(parents=True)
    rootfs = where / "rootfs"
    pth = f"{VENV}/lib/python3.11/site-packages/model-manager-app.pth"
    hashes = "--require-hashes " if "--hash=" in LOCK.read_text() else ""
    # the essential variant has no passwd package: the user is written as useradd would
    script = where / "steps.sh"
    script.write_text("\n".join((
        "set -eu",
        "unset PIP_FIND_LINKS PIP_CONSTRAINT PIP_CERT",  # the host's pip settings, not ours
        f"echo 'nonroot:x:{UID}:{UID}:nonroot:/home/nonroot:/usr/sbin/nologin' >> /etc/passwd",
        f"echo 'nonroot:x:{UID}:' >> /etc/group",
        "echo 'nonroot:*:19000:0:99999:7:::' >> /etc/shadow",
        f"mkdir -m 0750 /home/nonroot && chown {UID}:{UID} /home/nonroot",
        f"python3 -m venv /{VENV}",
        f"/{VENV}/bin/pip install --quiet --no-cache-dir --disable-pip-version-check "
        f"--no-index --find-links /tmp/wheels --only-binary=:all: --no-deps {hashes}"
        "-r /tmp/requirements.lock",
        f"/{VENV}/bin/python -c 'import grpc, cryptography, orjson, yaml, hypercorn'",
        f"echo /{APP} > /{pth}",
        "rm -rf /tmp/requirements.lock /tmp/steps.sh /tmp/wheels",
    )) + "\n")
    # the wheels come through the host's pip (its index, proxy and CA settings), for the
    # same CPython 3.11 on the same glibc; pip inside the root filesystem installs them offline
    wheels = where / "wheels"
    log("pip download the locked wheels")
    subprocess.run([sys.executable, "-m", "pip", "download", "--quiet", "--no-deps",
                    "--only-binary=:all:", "--dest", str(wheels), "-r", str(LOCK)], check=True)
    started = time.monotonic()
    log(f"mmdebstrap {SUITE} with {', '.join(PACKAGES)}, then the virtualenv")
    subprocess.run([
        "mmdebstrap", "--variant=essential", "--mode=root", "--quiet",
        f"--include={','.join(PACKAGES)}",
        "--aptopt=APT::Install-Recommends \"false\"",
        "--dpkgopt=path-exclude=/usr/share/doc/*", "--dpkgopt=path-exclude=/usr/share/man/*",
        "--dpkgopt=path-exclude=/usr/share/info/*", "--dpkgopt=path-exclude=/usr/share/locale/*",
        "--dpkgopt=path-include=/usr/share/doc/*/copyright",
        f"--customize-hook=copy-in {LOCK} {script} {wheels} /tmp",
        "--customize-hook=chroot \"$1\" sh /tmp/steps.sh",
        "--customize-hook=rm -rf \"$1\"/var/cache/apt/* \"$1\"/var/lib/apt/lists/* "
        "\"$1\"/var/log/* \"$1\"/root/.cache",
        SUITE, str(rootfs), MIRROR,
    ], check=True)  # fmt: skip
    log(f"root filesystem in {time.monotonic() - started:.0f}s; writing the layers")
    skip = ("dev", "proc", "sys", "run", "tmp", VENV)
    base = write_layer(rootfs, where / "base.tar.gz", skip=skip,
                       created_by=f"mmdebstrap --variant=essential {SUITE} "
                                  f"--include={','.join(PACKAGES)}; useradd nonroot")  # fmt: skip
    deps = write_layer(rootfs, where / "deps.tar.gz", include=[VENV],
                       created_by="python3 -m venv; pip install -r requirements.lock")
    shutil.rmtree(rootfs)
    shutil.rmtree(wheels)
    layers = [base, deps]
    record.write_text(json.dumps([{**dataclasses.asdict(layer), "blob": layer.blob.name}
                                  for layer in layers], indent=1))  # fmt: skip
    return layers


def build_app(work: pathlib.Path) -> Layer:
    """Step 3: the project, installed by pip into ``/opt/model-manager/app``."""
    source = work / "src"
    source.mkdir()
    for name in ("pyproject.toml", "README.md"):
        shutil.copy2(REPO / name, source / name)
    missing = [g for g in ("nodeplugin/csi/gen", "apiserver/storage/etcd/gen")
               if not (REPO / g / "__init__.py").exists()]
    if missing:
        raise SystemExit(f"generated gRPC stubs missing ({', '.join(missing)}): make install")
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc", "*.egg-info")
    for package in sources():
        shutil.copytree(REPO / package, source / package, ignore=ignore)
    stage = work / "stage"
    target = stage / APP
    subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--no-compile",
                    "--no-build-isolation", "--disable-pip-version-check",
                    "--target", str(target), str(source)], check=True)  # fmt: skip
    shutil.rmtree(target / "bin", ignore_errors=True)
    # hash-checked .pyc: valid whatever the files' mtimes, and never rewritten at run time
    subprocess.run([sys.executable, "-m", "compileall", "-q", "-j0", "--invalidation-mode",
                    "unchecked-hash", "-s", str(stage), "-p", "/", str(target)], check=True)
    for path in [target, *target.rglob("*")]:
        os.chown(path, 0, 0, follow_symlinks=False)
        path.chmod(0o755 if path.is_dir() else 0o644)
    for parent in (stage / "opt", stage / VENV):
        parent.chmod(0o755)
    return write_layer(stage, work / "app.tar.gz", include=[APP],
                       created_by=f"pip install --no-deps --target /{APP} .")


def image(out: pathlib.Path, cache: pathlib.Path) -> pathlib.Path:
    version = app_version()
    reference = f"{REPOSITORY}:{version}"
    out.mkdir(parents=True, exist_ok=True)
    archive = out / f"model-manager-{version}.oci.tar"
    layers = build_base(cache)
    with tempfile.TemporaryDirectory(dir=out) as scratch:
        layers = [*layers, build_app(pathlib.Path(scratch))]
        config = {"Env": [f"PATH={PATH}", "PYTHONDONTWRITEBYTECODE=1", "PYTHONUNBUFFERED=1"],
                  "User": f"{UID}:{UID}", "WorkingDir": "/home/nonroot",
                  "Entrypoint": [], "Cmd": ["python", "-m", "apiserver", "--help"],
                  "Labels": {"org.opencontainers.image.title": "model-manager",
                             "org.opencontainers.image.version": version}}  # fmt: skip
        unpacked = write_archive(archive, reference, layers, config)
    sizes = {"reference": reference, "archive": str(archive),
             "compressed_bytes": archive.stat().st_size, "unpacked_bytes": unpacked,
             "layers": [{"created_by": x.created_by, "compressed_bytes": x.size,
                         "unpacked_bytes": x.unpacked} for x in layers]}  # fmt: skip
    (out / f"model-manager-{version}.json").write_text(json.dumps(sizes, indent=1) + "\n")
    log(f"{reference}: {archive} ({archive.stat().st_size / 1e6:.1f} MB compressed, "
        f"{unpacked / 1e6:.1f} MB unpacked)")
    return archive


def registrar(binary: pathlib.Path, out: pathlib.Path, tag: str) -> pathlib.Path:
    """The node-driver-registrar as its upstream image ships it: one static binary."""
    if binary.suffix == ".xz":
        data = subprocess.run(["xz", "-dc", str(binary)], check=True, capture_output=True).stdout
    else:
        data = binary.read_bytes()
    reference = f"{REGISTRAR}:{tag}"
    out.mkdir(parents=True, exist_ok=True)
    archive = out / f"csi-node-driver-registrar-{tag}.oci.tar"
    with tempfile.TemporaryDirectory(dir=out) as scratch:
        layer = file_layer(pathlib.Path(scratch) / "layer.tar.gz", [
            ("csi-node-driver-registrar", data, 0o755), ("tmp", None, 0o1777),
            ("etc", None, 0o755),
            ("etc/passwd", b"root:x:0:0:root:/:/sbin/nologin\n", 0o644),
            ("etc/group", b"root:x:0:\n", 0o644),
        ], created_by="COPY csi-node-driver-registrar /")  # fmt: skip
        write_archive(archive, reference, [layer],
                      {"Entrypoint": ["/csi-node-driver-registrar"], "Env": [f"PATH={PATH}"]})
    log(f"{reference}: {archive} ({archive.stat().st_size / 1e6:.1f} MB)")
    return archive


# --- the lock -----------------------------------------------------------------------------------


def lock() -> None:
    """Pin the runtime dependency closure of model-manager to the versions in this venv."""
    from packaging.markers import default_environment
    from packaging.requirements import Requirement

    environment = {key: str(value) for key, value in default_environment().items()}
    pinned: dict[str, str] = {}
    pending = [(Requirement(r), "") for r in metadata.requires("model-manager") or []]
    while pending:
        requirement, extra = pending.pop()
        marker_env: dict[str, str] = {**environment, "extra": extra}
        if requirement.marker is not None and not requirement.marker.evaluate(marker_env):
            continue
        name = re.sub(r"[-_.]+", "-", requirement.name).lower()
        for wanted in sorted(requirement.extras):
            pending += [(Requirement(r), wanted) for r in metadata.requires(name) or []]
        if name in pinned:
            continue
        pinned[name] = metadata.version(name)
        pending += [(Requirement(r), "") for r in metadata.requires(name) or []]
    lines = [f"{name}=={version}" for name, version in sorted(pinned.items())]
    LOCK.write_text("# The runtime dependencies of model-manager, pinned (python images/build.py"
                    " lock).\n" + "\n".join(lines) + "\n")  # fmt: skip
    log(f"{LOCK}: {len(lines)} packages")


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    build = sub.add_parser("image", help="the model-manager image")
    build.add_argument("--out", type=pathlib.Path, default=REPO / ".local" / "images")
    build.add_argument("--cache", type=pathlib.Path, default=None)
    reg = sub.add_parser("registrar", help="the tests' node-driver-registrar image")
    reg.add_argument("--binary", type=pathlib.Path, required=True)
    reg.add_argument("--tag", default="v2.17.0")
    reg.add_argument("--out", type=pathlib.Path, default=REPO / ".local" / "images")
    sub.add_parser("lock", help="rewrite images/requirements.lock from this virtualenv")
    args = parser.parse_args(argv)
    if args.command == "image":
        image(args.out, args.cache or args.out / "cache")
    elif args.command == "registrar":
        registrar(args.binary, args.out, args.tag)
    else:
        lock()


if __name__ == "__main__":
    main()
