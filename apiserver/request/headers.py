"""Headers that carry one value: a request repeating one of them is refused before any work.

``Authorization`` (which credential?), ``Impersonate-User`` and ``Impersonate-Uid`` (which
identity?) and ``Content-Type`` (how is the body read?) would each let two readers take
different values; kube-apiserver reads the first, this server refuses the request with a 400
naming the header, so no layer can disagree. (Impersonate-Group and Impersonate-Extra-* are lists
by design; the front proxy's username header is checked by its authenticator.)
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from apiserver import errors

SINGLE_VALUED = ("authorization", "impersonate-user", "impersonate-uid", "content-type")
_SPELLED = {"authorization": "Authorization", "impersonate-user": "Impersonate-User",
            "impersonate-uid": "Impersonate-Uid", "content-type": "Content-Type"}


def problem(headers: Mapping[str, Sequence[str]]) -> errors.StatusError | None:
    """The 400 for the first single-valued header given more than once (``headers`` by
    lower-case name), else None."""
    for name in SINGLE_VALUED:
        values = headers.get(name)
        if values is not None and len(values) > 1:
            return errors.BadRequest(
                f"the {_SPELLED[name]} header was given {len(values)} times; it may be given at"
                " most once")
    return None
