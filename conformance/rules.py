"""Each check names the rule it tests: ``@rule("crud.duplicate", "a second create ...")``."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

import pytest

F = TypeVar("F", bound=Callable[..., Any])


def rule(rule_id: str, text: str) -> Callable[[F], F]:
    """Mark a check with its rule id and the sentence it proves."""

    def mark(check: F) -> F:
        marked: F = pytest.mark.rule(rule_id, text)(check)
        return marked

    return mark
