"""Kubernetes name grammars: DNS-1123 labels and subdomains, qualified names, label values.

The one owner of these rules: object names, namespaces, label and annotation keys, finalizers,
label selectors and the Secret and claim names of a ModelArtifact all use them. Each
``*_problems`` function returns kube-apiserver's reasons (empty when the value is fine), worded as
``k8s.io/apimachinery/pkg/util/validation`` words them, so messages read like upstream ones.
"""

from __future__ import annotations

import re

LABEL_MAX = 63
SUBDOMAIN_MAX = 253
QUALIFIED_NAME_MAX = 63
LABEL_VALUE_MAX = 63

_LABEL_FORMAT = "[a-z0-9]([-a-z0-9]*[a-z0-9])?"
_SUBDOMAIN_FORMAT = rf"{_LABEL_FORMAT}(\.{_LABEL_FORMAT})*"
_QUALIFIED_FORMAT = "([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]"
_LABEL = re.compile(_LABEL_FORMAT)
_SUBDOMAIN = re.compile(_SUBDOMAIN_FORMAT)
_QUALIFIED = re.compile(_QUALIFIED_FORMAT)

_LABEL_RULE = (
    "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and"
    " must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex"
    f" used for validation is '{_LABEL_FORMAT}')"
)
_SUBDOMAIN_RULE = (
    "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or"
    " '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used"
    f" for validation is '{_SUBDOMAIN_FORMAT}')"
)
_QUALIFIED_RULE = (
    "must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an"
    " alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for"
    f" validation is '{_QUALIFIED_FORMAT}')"
)
_LABEL_VALUE_RULE = (
    "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or"
    " '.', and must start and end with an alphanumeric character (e.g. 'MyValue',  or"
    f" 'my_value',  or '12345', regex used for validation is '({_QUALIFIED_FORMAT})?')"
)


def _too_long(limit: int) -> str:
    return f"must be no more than {limit} characters"


def is_dns_label(value: str) -> bool:
    return len(value) <= LABEL_MAX and _LABEL.fullmatch(value) is not None


def is_dns_subdomain(value: str) -> bool:
    return len(value) <= SUBDOMAIN_MAX and _SUBDOMAIN.fullmatch(value) is not None


def dns_label_problems(value: str) -> list[str]:
    """Why ``value`` is not a DNS-1123 label (a namespace, a claim name)."""
    problems = []
    if len(value) > LABEL_MAX:
        problems.append(_too_long(LABEL_MAX))
    if not _LABEL.fullmatch(value):
        problems.append(_LABEL_RULE)
    return problems


def dns_subdomain_problems(value: str) -> list[str]:
    """Why ``value`` is not a DNS-1123 subdomain (an object name, a Secret name)."""
    problems = []
    if len(value) > SUBDOMAIN_MAX:
        problems.append(_too_long(SUBDOMAIN_MAX))
    if not _SUBDOMAIN.fullmatch(value):
        problems.append(_SUBDOMAIN_RULE)
    return problems


def qualified_name_problems(value: str) -> list[str]:
    """Why ``value`` is not a qualified name ``[prefix/]name`` (label keys, finalizers)."""
    parts = value.split("/")
    if len(parts) == 1:
        name = parts[0]
    elif len(parts) == 2:
        prefix, name = parts
        if not prefix:
            return ["prefix part must be non-empty"]
        problems = dns_subdomain_problems(prefix)
        if problems:
            return [f"prefix part {problem}" for problem in problems]
    else:
        return [f"a qualified name {_QUALIFIED_RULE} with an optional DNS subdomain prefix and"
                " '/' (e.g. 'example.com/MyName')"]
    if not name:
        return ["name part must be non-empty"]
    if len(name) > QUALIFIED_NAME_MAX:
        return [f"name part {_too_long(QUALIFIED_NAME_MAX)}"]
    if not _QUALIFIED.fullmatch(name):
        return [f"name part {_QUALIFIED_RULE}"]
    return []


def label_value_problems(value: str) -> list[str]:
    """Why ``value`` is not a label value (empty, or a qualified name part of 63 at most)."""
    problems = []
    if len(value) > LABEL_VALUE_MAX:
        problems.append(_too_long(LABEL_VALUE_MAX))
    if value and not _QUALIFIED.fullmatch(value):
        problems.append(_LABEL_VALUE_RULE)
    return problems
