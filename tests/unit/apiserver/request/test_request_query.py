"""The query read once: a repeated single-valued parameter is the request's problem, lists stay
lists, unknown parameters are ignored, and the size is bounded before any work."""

from __future__ import annotations

import pytest

from apiserver.request import query


@pytest.mark.parametrize("name", sorted(query.SINGLE_VALUED))
def test_every_single_valued_parameter_given_twice_is_refused_naming_it(name: str) -> None:
    for text in (f"{name}=a&{name}=b", f"{name}=a&{name}=", f"{name}=&{name}=a",
                 f"{name}=a&{name}=a"):
        parsed = query.parse(text)
        assert parsed.problem is not None, text
        assert parsed.problem.code == 400
        assert f'query parameter "{name}" was given 2 times' in parsed.problem.message


def test_multi_valued_and_unknown_parameters() -> None:
    parsed = query.parse("dryRun=All&dryRun=All&exclude=a&exclude=b&other=1&other=2")
    assert parsed.problem is None
    assert parsed.all("dryRun") == ("All", "All") and parsed.all("exclude") == ("a", "b")
    assert parsed.get("missing", "default") == "default"
    assert not parsed.has("missing") and parsed.has("other")


def test_values_are_percent_decoded_once() -> None:
    parsed = query.parse("fieldSelector=metadata.name%3Dqwen&labelSelector=a+in+%28b%29")
    assert parsed.get("fieldSelector") == "metadata.name=qwen"
    assert parsed.get("labelSelector") == "a in (b)"


def test_too_many_parameters_is_a_problem_not_work() -> None:
    parsed = query.parse("&".join(f"p{i}=1" for i in range(query.MAX_PARAMETERS + 1)))
    assert parsed.problem is not None and parsed.problem.code == 400
    assert "more than 128 parameters" in parsed.problem.message
    assert query.parse("&".join(f"p{i}=1" for i in range(query.MAX_PARAMETERS))).problem is None
