"""Static token file: parsing, authentication, writing."""

from __future__ import annotations

import os
import pathlib
import stat

import pytest

from apiserver.auth import static, user


def test_parse_kube_token_file_format() -> None:
    text = 'tok1,alice,uid-1,"dev,ops"\n# comment\n\ntok2,bob,uid-2\ntok3,carol\n'
    entries = static.parse(text)
    assert [(e.name, e.uid, e.groups) for e in entries] == [
        ("alice", "uid-1", ("dev", "ops")),
        ("bob", "uid-2", ()),
        ("carol", "", ()),
    ]
    assert entries[0].token == "tok1"


def test_malformed_line_names_the_line_not_the_token() -> None:
    with pytest.raises(static.TokenFileError, match="line 2") as info:
        static.parse("tok1,alice\nsecret-token-value\n")
    assert "secret-token-value" not in str(info.value)


def test_authenticate_adds_system_authenticated() -> None:
    table = static.TokenTable(static.parse('tok1,alice,u1,"dev"\n'))
    found = table.find("tok1")
    assert found == user.UserInfo(name="alice", uid="u1", groups=("dev", user.AUTHENTICATED))
    assert table.find("tok2") is None
    assert table.find("") is None


def test_group_not_duplicated() -> None:
    table = static.TokenTable([static.Entry("t", "a", groups=(user.AUTHENTICATED,))])
    found = table.find("t")
    assert found is not None
    assert found.groups == (user.AUTHENTICATED,)


def test_write_round_trips_and_is_private(tmp_path: pathlib.Path) -> None:
    path = tmp_path / "tokens.csv"
    entries = [
        static.Entry(static.new_token(), "admin", "admin", (user.MASTERS,)),
        static.Entry(static.new_token(), "worker", "", ("a", "b")),
    ]
    static.write(path, entries)
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert static.parse(path.read_text()) == entries
    assert static.load(path).find(entries[1].token) is not None


def test_token_is_not_in_repr() -> None:
    entry = static.Entry("very-secret", "alice")
    assert "very-secret" not in repr(entry)


def test_new_tokens_are_long_and_distinct() -> None:
    tokens = {static.new_token() for _ in range(50)}
    assert len(tokens) == 50
    assert all(len(t) >= 40 for t in tokens)


def test_write_follows_nothing_planted_at_its_old_temporary_name(tmp_path: pathlib.Path) -> None:
    victim = tmp_path / "victim"
    victim.write_text("precious")
    os.symlink(victim, tmp_path / ".tokens.csv.tmp")
    entry = static.Entry(static.new_token(), "admin")
    static.write(tmp_path / "tokens.csv", [entry])
    assert victim.read_text() == "precious"
    assert static.load(tmp_path / "tokens.csv").find(entry.token) is not None


def test_extra_column_round_trips_and_reaches_the_user(tmp_path: pathlib.Path) -> None:
    path = tmp_path / "tokens.csv"
    extra = ((user.POD_NAME, "plugin-a"), (user.POD_UID, "u-1"), (user.NODE_NAME, "node a&b"),
             ("scopes", "x"), ("scopes", "y"))
    entries = [static.Entry("tok", "system:serviceaccount:ns:sa", "uid", ("g1", "g2"), extra)]
    static.write(path, entries)
    assert "authentication.kubernetes.io/pod-name=plugin-a" in path.read_text()
    assert static.parse(path.read_text()) == entries
    found = static.load(path).find("tok")
    assert found is not None
    assert found.extra == {user.POD_NAME: ("plugin-a",), user.POD_UID: ("u-1",),
                           user.NODE_NAME: ("node a&b",), "scopes": ("x", "y")}


def test_malformed_extra_column_names_the_line() -> None:
    with pytest.raises(static.TokenFileError, match="line 1: the extra column"):
        static.parse('secret,alice,u,"g",no-equals-sign\n')
