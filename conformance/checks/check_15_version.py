"""``/version``: the shape of kube's version.Info, which kubectl and client libraries parse."""

from __future__ import annotations

import json
import re

from conformance.api import Api
from conformance.kubectl import Kubectl
from conformance.plugin import Note
from conformance.rules import rule

FIELDS = ("major", "minor", "gitVersion", "gitCommit", "gitTreeState", "buildDate", "goVersion",
          "compiler", "platform")
SKEW = "version difference between client"
"""kubectl's warning when it is more than one minor version from the server."""
SEMVER = re.compile(r"^v\d+\.\d+\.\d+([-+][0-9A-Za-z.+-]*)?$")


@rule("version.info", "/version answers kube's version.Info: every field a string, numeric "
      "major and minor, a semver gitVersion, platform os/arch")  # fmt: skip
def check_version_info(admin: Api) -> None:
    response = admin.get("/version")
    assert response.status_code == 200, response.text[:300]
    assert response.headers["content-type"].startswith("application/json")
    body = response.json()
    missing = [f for f in FIELDS if not isinstance(body.get(f), str)]
    assert missing == [], f"not strings: {missing}"
    assert body["major"].isdigit(), body["major"]
    assert re.fullmatch(r"\d+\+?", body["minor"]), body["minor"]  # GKE writes "28+"
    assert SEMVER.match(body["gitVersion"]), body["gitVersion"]
    assert re.fullmatch(r"[a-z0-9]+/[a-z0-9_]+", body["platform"]), body["platform"]
    assert body["gitVersion"].startswith(f"v{body['major']}.{body['minor'].rstrip('+')}.")


@rule("version.kubectl", "kubectl version reads the server's version without a warning about "
      "the server (a client/server version skew is reported as a note, not a failure)")
def check_version_kubectl(admin: Api, kubectl: Kubectl, note: Note) -> None:
    done = kubectl.run("version", "-o", "json")
    assert done.returncode == 0, done.stderr[:300]
    server = json.loads(done.stdout)["serverVersion"]
    assert server["gitVersion"] == admin.get("/version").json()["gitVersion"]
    warnings = [line for line in done.stderr.splitlines() if "WARNING" in line]
    skew = [line for line in warnings if SKEW in line]
    for line in skew:
        note(line.strip()[:300])  # about the operator's kubectl, not about the API
    assert [line for line in warnings if line not in skew] == [], done.stderr[:300]
