"""The query string, read once: each parameter's values, the one accessor every layer uses.

A parameter the API knows as single-valued (everything but ``dryRun`` and the health checks'
``exclude``) may be given at most once: a second occurrence makes the request a 400 naming the
parameter, so no two readers can ever take different values of it. Values are checked as kube
parses them: booleans as Go's ``strconv.ParseBool`` spells them, integers within int64. Unknown
parameters are ignored, as kube-apiserver ignores them. No message echoes more than a cut of a
value.
"""

from __future__ import annotations

import dataclasses
import re
import urllib.parse
from collections.abc import Mapping

from apiserver import errors
from openapi import fields

MULTI_VALUED = frozenset({"dryRun", "exclude"})
"""Parameters kube reads as lists; every other known parameter is single-valued."""
SINGLE_VALUED = frozenset({
    "watch", "labelSelector", "fieldSelector", "resourceVersion", "resourceVersionMatch",
    "limit", "continue", "timeoutSeconds", "allowWatchBookmarks", "sendInitialEvents",
    "fieldManager", "fieldValidation", "force", "propagationPolicy", "orphanDependents",
    "gracePeriodSeconds", "pretty", "timeout", "includeObject", "hash", "verbose",
})
MAX_PARAMETERS = 128
"""Parameters one query may carry (kubectl sends a handful); more is a 400 before any work."""
TRUE = ("1", "t", "T", "TRUE", "true", "True")
FALSE = ("0", "f", "F", "FALSE", "false", "False")
_INT64 = re.compile(r"-?[0-9]{1,19}")


@dataclasses.dataclass(frozen=True, slots=True)
class Query:
    """Every value of every parameter, in the order sent; read through the accessors only."""

    values: Mapping[str, tuple[str, ...]]
    problem: errors.StatusError | None = None
    """Why the query cannot be served (a repeated single-valued parameter, too many
    parameters), found while parsing; ``RequestInfo`` refuses the request with it."""

    def has(self, name: str) -> bool:
        return name in self.values

    def get(self, name: str, default: str = "") -> str:
        """The value of a single-valued parameter (its first, and when the query is servable its
        only, occurrence), ``default`` when absent."""
        found = self.values.get(name)
        return found[0] if found else default

    def all(self, name: str) -> tuple[str, ...]:
        """Every value of a multi-valued parameter."""
        return self.values.get(name, ())

    def boolean(self, name: str) -> bool | None:
        """None when absent; 400 unless it is a boolean as kube spells them."""
        if name not in self.values:
            return None
        value = self.get(name)
        if value in TRUE:
            return True
        if value in FALSE:
            return False
        raise errors.BadRequest(
            f'invalid value for "{name}": {fields.render(value)} is not a boolean')

    def integer(self, name: str) -> int | None:
        """None when absent or empty; 400 unless it is a 64-bit integer (as kube parses it)."""
        value = self.get(name)
        if not value:
            return None
        if not _INT64.fullmatch(value) or not -(2**63) <= int(value) < 2**63:
            raise errors.BadRequest(
                f'invalid value for "{name}": {fields.render(value)} is not a 64-bit integer')
        return int(value)


EMPTY = Query({})


def parse(query_string: str) -> Query:
    """The query of one request (``scope["query_string"]``, percent-decoded as UTF-8)."""
    if not query_string:
        return EMPTY
    try:
        pairs = urllib.parse.parse_qsl(query_string, keep_blank_values=True,
                                       max_num_fields=MAX_PARAMETERS)
    except ValueError:
        return Query({}, errors.BadRequest(
            f"the query has more than {MAX_PARAMETERS} parameters"))
    values: dict[str, list[str]] = {}
    for name, value in pairs:
        values.setdefault(name, []).append(value)
    problem: errors.StatusError | None = None
    for name, found in values.items():
        if len(found) > 1 and name in SINGLE_VALUED:
            problem = errors.BadRequest(
                f'query parameter "{name}" was given {len(found)} times; it may be given at'
                " most once")
            break
    return Query({name: tuple(found) for name, found in values.items()}, problem)
