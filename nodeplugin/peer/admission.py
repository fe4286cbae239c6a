"""Who may ask a peer: the node plugin's own ServiceAccount, by a TokenReview of its token.

The caller's bearer token (projected with ``wire.AUDIENCE``) is reviewed through the plugin's
``reviews.Reviewer`` (one built with that audience, so a token for the API server is not
accepted, nor a peer token by the API server); answers are kept briefly there, keyed by the
token's hash. Only ``plugin_user`` is admitted: a tenant's token that authenticates is 403. An
admitted caller is known by its ``reviews.Identity`` (the plugin Pod its token is bound to), which
the port's stream slots count by (``slots.py``).
"""

from __future__ import annotations

from starlette import requests, responses

from nodeplugin import reviews, serve


def status(code: int, reason: str, message: str, *,
           headers: dict[str, str] | None = None) -> responses.JSONResponse:
    body = {"kind": "Status", "apiVersion": "v1", "status": "Failure", "message": message,
            "reason": reason, "code": code}
    return responses.JSONResponse(body, status_code=code, headers=headers)


class Admission:
    def __init__(self, reviewer: reviews.Reviewer, plugin_user: str) -> None:
        self._reviewer = reviewer
        self._user = plugin_user

    async def admit(self, request: requests.Request) -> reviews.Identity | responses.Response:
        """The caller's identity when it is a node plugin, else the answer to send."""
        token = serve.bearer(request)
        if token is None:
            return status(401, "Unauthorized", "a bearer token is required")
        try:
            found = await self._reviewer.identity_of(token)
        except reviews.ReviewFailed as exc:
            return status(503, "ServiceUnavailable", f"cannot check the token now: {exc}")
        if found is None:
            return status(401, "Unauthorized", "the token is not valid for the peer audience")
        if not self._user or found.user != self._user:
            return status(403, "Forbidden", f'user "{found.user[:253]}" may not read peer trees '
                          "(node plugins only)")
        return found
