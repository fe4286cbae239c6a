"""Watch: ADDED, MODIFIED and DELETED for one object, in order, from a list's resourceVersion."""

from __future__ import annotations

import queue
import threading
from typing import Any

from conformance import api as a
from conformance.api import Api
from conformance.fixtures import Run
from conformance.rules import rule


@rule("watch.events", "a watch from a list's resourceVersion with a label selector sees ADDED, "
      "MODIFIED and DELETED of the object, in order")  # fmt: skip
def check_watch_events(conformance_run: Run, admin: Api) -> None:
    conformance_run.ensure_namespaces()
    namespace = conformance_run.namespace
    selector = f"watch={conformance_run.id}"
    listed = admin.get(a.artifacts(namespace), params={"labelSelector": selector})
    assert listed.status_code == 200
    version = listed.json()["metadata"]["resourceVersion"]
    events: queue.Queue[dict[str, Any] | Exception] = queue.Queue()
    seconds = max(5, int(conformance_run.options.timeout))

    def read() -> None:
        try:
            for event in admin.watch(a.artifacts(namespace),
                                     {"labelSelector": selector, "resourceVersion": version},
                                     seconds):  # fmt: skip
                events.put(event)
                if event["type"] == "DELETED":
                    return
        except Exception as err:  # handed to the check below
            events.put(err)

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    body = conformance_run.artifact_body("watch-me")
    body["metadata"]["labels"]["watch"] = conformance_run.id
    created = admin.post(a.artifacts(namespace), body)
    assert created.status_code == 201, created.text[:300]
    conformance_run.track(namespace, "watch-me")
    path = a.artifacts(namespace, "watch-me")
    patched = admin.patch(path, {"metadata": {"annotations": {"seen": "yes"}}}, a.MERGE_PATCH)
    assert patched.status_code == 200
    assert admin.delete(path).status_code in (200, 202)
    seen: list[str] = []
    while "DELETED" not in seen:
        try:
            event = events.get(timeout=seconds + conformance_run.options.timeout)
        except queue.Empty:
            raise AssertionError(f"watch ended early; saw {seen}") from None
        if isinstance(event, Exception):
            raise AssertionError(f"watch failed: {event}")
        if event["type"] == "BOOKMARK":
            continue
        assert event["object"]["metadata"]["name"] == "watch-me", event
        seen.append(event["type"])
    assert seen[0] == "ADDED" and seen[-1] == "DELETED" and "MODIFIED" in seen, seen
    assert seen.index("MODIFIED") > 0
    reader.join(timeout=conformance_run.options.timeout)
