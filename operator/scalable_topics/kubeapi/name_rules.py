"""The name rules of k8s.io/apimachinery (``util/validation`` and ``api/validate/content``):
DNS-1123 labels and subdomains, DNS-1035 labels, qualified names (label and annotation keys,
finalizers) and label values.

Each ``*_errors`` function answers as kube's ``Is...`` function does: the messages that follow
``Invalid value: "x": `` in a field error, none when the value is valid. A length is Go's
``len``, in bytes. Kube words a length limit two ways, and so do these: util/validation's
``MaxLenError`` says "characters" (object names, groups), the content package's, which checks
label keys and values, says "bytes".
"""

from __future__ import annotations

import re
from typing import Final

# The longest DNS-1123 or DNS-1035 label, qualified name (its name part) and label value.
LABEL_MAX: Final = 63
SUBDOMAIN_MAX: Final = 253

_DNS1123_LABEL: Final = "[a-z0-9]([-a-z0-9]*[a-z0-9])?"
_DNS1123_SUBDOMAIN: Final = _DNS1123_LABEL + "(\\." + _DNS1123_LABEL + ")*"
_DNS1035_LABEL: Final = "[a-z]([-a-z0-9]*[a-z0-9])?"
_QUALIFIED_NAME: Final = "([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]"
_LABEL_VALUE: Final = "(" + _QUALIFIED_NAME + ")?"

_DNS1123_LABEL_RE: Final = re.compile(_DNS1123_LABEL)
_DNS1123_SUBDOMAIN_RE: Final = re.compile(_DNS1123_SUBDOMAIN)
_DNS1035_LABEL_RE: Final = re.compile(_DNS1035_LABEL)
_QUALIFIED_NAME_RE: Final = re.compile(_QUALIFIED_NAME)
_LABEL_VALUE_RE: Final = re.compile(_LABEL_VALUE)

_DNS1123_LABEL_MESSAGE: Final = (
    "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', "
    "and must start and end with an alphanumeric character"
)
_DNS1123_SUBDOMAIN_MESSAGE: Final = (
    "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' "
    "or '.', and must start and end with an alphanumeric character"
)
_DNS1035_LABEL_MESSAGE: Final = (
    "a DNS-1035 label must consist of lower case alphanumeric characters or '-', start with "
    "an alphabetic character, and end with an alphanumeric character"
)
_QUALIFIED_NAME_MESSAGE: Final = (
    "must consist of alphanumeric characters, '-', '_' or '.', and must start and end with "
    "an alphanumeric character"
)
_LABEL_VALUE_MESSAGE: Final = (
    "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' "
    "or '.', and must start and end with an alphanumeric character"
)
_QUALIFIED_NAME_EXAMPLES: Final = ("MyName", "my.name", "123-abc")


def _regex_error(message: str, pattern: str, *examples: str) -> str:
    """``RegexError``: ``<message> (e.g. 'a',  or 'b', regex used for validation is '...')``
    (the doubled space is kube's)."""
    if not examples:
        return f"{message} (regex used for validation is '{pattern}')"
    shown = "".join(f"{' or ' if i else ''}'{example}', " for i, example in enumerate(examples))
    return f"{message} (e.g. {shown}regex used for validation is '{pattern}')"


def _max_len_error(length: int, unit: str) -> str:
    return f"must be no more than {length} {unit}"


def _go_len(text: str) -> int:
    """Go's ``len`` of the string: its UTF-8 bytes (a lone surrogate, which Go's JSON decoder
    turns into U+FFFD, is three bytes either way)."""
    return len(text.encode("utf-8", "surrogatepass"))


def dns1123_label_errors(value: str) -> list[str]:
    """``IsDNS1123Label``: a namespace's name."""
    errors = []
    if _go_len(value) > LABEL_MAX:
        errors.append(_max_len_error(LABEL_MAX, "characters"))
    if not _DNS1123_LABEL_RE.fullmatch(value):
        if _DNS1123_SUBDOMAIN_RE.fullmatch(value):
            errors.append("must not contain dots")
        else:
            errors.append(
                _regex_error(_DNS1123_LABEL_MESSAGE, _DNS1123_LABEL, "my-name", "123-abc")
            )
    return errors


def _dns1123_subdomain_errors(value: str, unit: str) -> list[str]:
    errors = []
    if _go_len(value) > SUBDOMAIN_MAX:
        errors.append(_max_len_error(SUBDOMAIN_MAX, unit))
    if not _DNS1123_SUBDOMAIN_RE.fullmatch(value):
        errors.append(_regex_error(_DNS1123_SUBDOMAIN_MESSAGE, _DNS1123_SUBDOMAIN, "example.com"))
    return errors


def dns1123_subdomain_errors(value: str) -> list[str]:
    """``IsDNS1123Subdomain``: most objects' names, an API group."""
    return _dns1123_subdomain_errors(value, "characters")


def dns1035_label_errors(value: str) -> list[str]:
    """``IsDNS1035Label``: a CRD's plural, singular, short names, kind (lowercased)."""
    errors = []
    if _go_len(value) > LABEL_MAX:
        errors.append(_max_len_error(LABEL_MAX, "characters"))
    if not _DNS1035_LABEL_RE.fullmatch(value):
        errors.append(_regex_error(_DNS1035_LABEL_MESSAGE, _DNS1035_LABEL, "my-name", "abc-123"))
    return errors


def qualified_name_errors(value: str) -> list[str]:
    """``IsQualifiedName`` (content.IsLabelKey): a label key, annotation key or finalizer, an
    optional DNS subdomain prefix and ``/``, then a name of up to 63 bytes."""
    parts = value.split("/")
    if len(parts) > 2:
        return [
            "a valid label key "
            + _regex_error(_QUALIFIED_NAME_MESSAGE, _QUALIFIED_NAME, *_QUALIFIED_NAME_EXAMPLES)
            + " with an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')"
        ]
    errors: list[str] = []
    name = parts[-1]
    if len(parts) == 2:
        prefix = parts[0]
        if not prefix:
            errors.append("prefix part must be non-empty")
        else:
            errors += ["prefix part " + e for e in _dns1123_subdomain_errors(prefix, "bytes")]
    if not name:
        errors.append("name part must be non-empty")
    elif _go_len(name) > LABEL_MAX:
        errors.append("name part " + _max_len_error(LABEL_MAX, "bytes"))
    if not _QUALIFIED_NAME_RE.fullmatch(name):
        errors.append(
            "name part "
            + _regex_error(_QUALIFIED_NAME_MESSAGE, _QUALIFIED_NAME, *_QUALIFIED_NAME_EXAMPLES)
        )
    return errors


def label_value_errors(value: str) -> list[str]:
    """``IsValidLabelValue`` (content.IsLabelValue): empty, or a name of up to 63 bytes."""
    errors = []
    if _go_len(value) > LABEL_MAX:
        errors.append(_max_len_error(LABEL_MAX, "bytes"))
    if not _LABEL_VALUE_RE.fullmatch(value):
        errors.append(
            _regex_error(_LABEL_VALUE_MESSAGE, _LABEL_VALUE, "MyValue", "my_value", "12345")
        )
    return errors
