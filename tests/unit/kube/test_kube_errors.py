"""kube.errors: every shape of failure becomes one typed error, bounded, without headers."""

from __future__ import annotations

import httpx2
from lightkube.core.exceptions import ApiError

from kube import errors

REQUEST = httpx2.Request(
    "GET", "https://10.0.0.1/api/v1/pods", headers={"Authorization": "Bearer s3cr3t"}
)


def _response(code: int, body: bytes, content_type: str) -> httpx2.Response:
    return httpx2.Response(
        code, content=body, headers={"Content-Type": content_type}, request=REQUEST
    )


def test_status_bodies_keep_code_reason_and_message() -> None:
    body = (b'{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":'
            b'"pods \\"x\\" not found","reason":"NotFound","details":{"name":"x","kind":"pods"},'
            b'"code":404}')  # fmt: skip
    lightkube_error = ApiError(request=REQUEST, response=_response(404, body, "application/json"))
    typed = errors.translate(lightkube_error)
    assert isinstance(typed, errors.NotFound)
    assert (typed.code, typed.reason, typed.message) == (404, "NotFound", 'pods "x" not found')
    assert typed.details == {"name": "x", "kind": "pods"}


def test_conflict_and_already_exists_are_told_apart() -> None:
    def status(reason: str) -> dict[str, object]:
        return {"kind": "Status", "code": 409, "reason": reason, "message": "m"}

    assert isinstance(errors.from_status(status("Conflict")), errors.Conflict)
    assert isinstance(errors.from_status(status("AlreadyExists")), errors.AlreadyExists)
    assert isinstance(errors.from_status({"code": 410, "message": "too old"}), errors.Expired)
    assert errors.from_status({"code": 410}).reason == "Expired"


def test_plain_text_answers_and_long_messages() -> None:
    unavailable = httpx2.HTTPStatusError(
        "x", request=REQUEST, response=_response(503, b"service unavailable\n", "text/plain")
    )
    typed = errors.translate(unavailable)
    assert isinstance(typed, errors.ServerError)
    assert (typed.code, typed.reason, typed.message) == (
        503, "ServiceUnavailable", "service unavailable"
    )
    huge = errors.from_response(_response(500, b"x" * 5000, "text/plain"))
    assert len(huge.message) <= errors.MESSAGE_LIMIT + 3


def test_transport_failures_never_carry_the_token() -> None:
    failure = httpx2.ConnectError("[Errno 111] Connection refused", request=REQUEST)
    refused = errors.translate(failure)
    assert isinstance(refused, errors.ConnectionFailed) and refused.code == 0
    timed_out = errors.translate(httpx2.ReadTimeout("timed out", request=REQUEST))
    assert isinstance(timed_out, errors.ConnectionFailed) and timed_out.reason == "Timeout"
    for typed in (refused, timed_out):
        assert "s3cr3t" not in str(typed)
    assert errors.translate(ValueError("not ours")) is None
