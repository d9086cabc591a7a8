"""The string formats a CRD schema may declare, checked as kube-openapi's strfmt registry checks
them (``date-time``, ``byte``, ``k8s-short-name`` ...)."""

from __future__ import annotations

import base64
import binascii
import ipaddress
import re
from collections.abc import Callable
from datetime import date
from email.utils import parseaddr
from typing import Final
from urllib.parse import urlsplit

from scalable_topics.kubeapi import name_rules


def _date(text: str) -> bool:
    if not re.fullmatch(r"\d{4}-\d{2}-\d{2}", text):
        return False
    try:
        date(int(text[:4]), int(text[5:7]), int(text[8:10]))
    except ValueError:
        return False
    return True


_TIME = re.compile(r"^([0-9]{2}):([0-9]{2}):([0-9]{2})(.[0-9]+)?(z|([+-][0-9]{2}:[0-9]{2}))$")


def _date_time(text: str) -> bool:
    if len(text) < 4:
        return False
    parts = text.lower().split("t")
    if len(parts) < 2 or not _date(parts[0]):
        return False
    found = _TIME.search(parts[1])
    return found is not None and found[1] <= "23" and found[2] <= "59" and found[3] <= "59"


_GO_DURATION = re.compile(r"[-+]?(?:(?:\d+\.?\d*|\.\d+)(?:ns|us|µs|μs|ms|s|m|h))+")
_LOOSE_DURATION = re.compile(r"((\d+)\s*([A-Za-zµ]+))")
_LOOSE_UNITS: Final = (
    ("ns", "nano"),
    ("us", "µs", "micro"),
    ("ms", "milli"),
    ("s", "sec"),
    ("m", "min"),
    ("h", "hr", "hour"),
    ("d", "day"),
    ("w", "wk", "week"),
)


def _duration(text: str) -> bool:
    """time.ParseDuration, or strfmt's looser "3 days 4h" form."""
    if text in ("0", "+0", "-0") or _GO_DURATION.fullmatch(text):
        return True
    matched = False
    for _, _, unit in _LOOSE_DURATION.findall(text):
        unit = unit.lower().strip()
        for variants in _LOOSE_UNITS:
            last = len(variants) - 1
            for position, variant in enumerate(variants):
                if (position == last and unit.startswith(variant)) or variant == unit:
                    matched = True
    return matched


_BASE64 = re.compile(
    r"^(?:[A-Za-z0-9+/]{4})*(?:[A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=|[A-Za-z0-9+/]{4})$"
)


def _byte(text: str) -> bool:
    if not _BASE64.match(text):
        return False
    try:
        base64.b64decode(text, validate=True)
    except binascii.Error:
        return False
    return True


def _short_name(text: str) -> bool:
    return not name_rules.dns1123_label_errors(text)


def _long_name(text: str) -> bool:
    return not name_rules.dns1123_subdomain_errors(text)


_UUID_PATTERNS: Final = {
    "": r"[0-9a-f]{4}-?[0-9a-f]{4}",
    "3": r"3[0-9a-f]{3}-?[0-9a-f]{4}",
    "4": r"4[0-9a-f]{3}-?[89ab][0-9a-f]{3}",
    "5": r"5[0-9a-f]{3}-?[89ab][0-9a-f]{3}",
}


def _uuid(version: str) -> Callable[[str], bool]:
    middle = _UUID_PATTERNS[version]
    pattern = re.compile(rf"^[0-9a-f]{{8}}-?[0-9a-f]{{4}}-?{middle}-?[0-9a-f]{{12}}$", re.I)
    return lambda text: pattern.match(text) is not None


def _ipv4(text: str) -> bool:
    try:
        ipaddress.ip_address(text)
    except ValueError:
        # netutils.ParseIPSloppy accepts leading zeros in IPv4 parts.
        parts = text.split(".")
        return len(parts) == 4 and all(p.isdigit() and int(p) <= 255 for p in parts)
    return "." in text


def _ipv6(text: str) -> bool:
    try:
        ipaddress.ip_address(text)
    except ValueError:
        return False
    return ":" in text


def _cidr(text: str) -> bool:
    try:
        ipaddress.ip_network(text, strict=False)
    except ValueError:
        return False
    return "/" in text


_HOSTNAME = re.compile(
    r"^([a-zA-Z0-9\w]((-?[a-zA-Z0-9\w]{0,62})?)|([a-zA-Z0-9\w](([a-zA-Z0-9\-\w]{0,61}"
    r"[a-zA-Z0-9\w])?)(\.)){1,}([a-zA-Z\w]){2,63})$"
)


def _hostname(text: str) -> bool:
    return (
        _HOSTNAME.match(text) is not None
        and len(text) <= 255
        and all(len(part) <= 63 for part in text.split("."))
    )


def _email(text: str) -> bool:
    _, address = parseaddr(text)
    return bool(address) and "@" in address


def _uri(text: str) -> bool:
    """govalidator.IsRequestURI: an absolute URI, or an absolute path."""
    if text.startswith("/"):
        return True
    try:
        parts = urlsplit(text)
    except ValueError:
        return False
    return bool(parts.scheme)


_MAC = re.compile(
    r"^([0-9A-Fa-f]{2}[:-]){5}([0-9A-Fa-f]{2})$|^([0-9A-Fa-f]{4}\.){2}([0-9A-Fa-f]{4})$"
    r"|^([0-9A-Fa-f]{2}[:-]){7}([0-9A-Fa-f]{2})$|^([0-9A-Fa-f]{4}\.){3}([0-9A-Fa-f]{4})$"
    r"|^([0-9A-Fa-f]{2}[:-]){19}([0-9A-Fa-f]{2})$|^([0-9A-Fa-f]{4}\.){9}([0-9A-Fa-f]{4})$"
)
_HEXCOLOR = re.compile(r"^#?([0-9a-fA-F]{3}|[0-9a-fA-F]{6})$")
_RGBCOLOR = re.compile(
    r"^rgb\(\s*(0|[1-9]\d?|1\d\d?|2[0-4]\d|25[0-5])\s*,\s*(0|[1-9]\d?|1\d\d?|2[0-4]\d|25[0-5])"
    r"\s*,\s*(0|[1-9]\d?|1\d\d?|2[0-4]\d|25[0-5])\s*\)$"
)
_SSN = re.compile(r"^\d{3}[- ]?\d{2}[- ]?\d{4}$")
_BSON_OBJECT_ID = re.compile(r"^[0-9a-fA-F]{24}$")


def _isbn10(text: str) -> bool:
    digits = re.sub(r"[\s-]", "", text)
    if not re.fullmatch(r"\d{9}[\dX]", digits):
        return False
    total = sum((10 - i) * (10 if c == "X" else int(c)) for i, c in enumerate(digits))
    return total % 11 == 0


def _isbn13(text: str) -> bool:
    digits = re.sub(r"[\s-]", "", text)
    if not re.fullmatch(r"\d{13}", digits):
        return False
    total = sum((3 if i % 2 else 1) * int(c) for i, c in enumerate(digits[:12]))
    return (10 - total % 10) % 10 == int(digits[12])


def _creditcard(text: str) -> bool:
    digits = re.sub(r"[^0-9]", "", text)
    if not re.fullmatch(
        r"(?:4[0-9]{12}(?:[0-9]{3})?|5[1-5][0-9]{14}|6(?:011|5[0-9][0-9])[0-9]{12}|3[47][0-9]{13}"
        r"|3(?:0[0-5]|[68][0-9])[0-9]{11}|(?:2131|1800|35\d{3})\d{11})",
        digits,
    ):
        return False
    total = 0
    for position, char in enumerate(reversed(digits)):
        digit = int(char) * (2 if position % 2 else 1)
        total += digit - 9 if digit > 9 else digit
    return total % 10 == 0


# Keyed by the normalised name (dashes removed), as go-openapi looks formats up.
_CHECKS: Final[dict[str, Callable[[str], bool]]] = {
    "datetime": _date_time,
    "date": _date,
    "duration": _duration,
    "byte": _byte,
    "password": lambda _: True,
    "uuid": _uuid(""),
    "uuid3": _uuid("3"),
    "uuid4": _uuid("4"),
    "uuid5": _uuid("5"),
    "ipv4": _ipv4,
    "ipv6": _ipv6,
    "cidr": _cidr,
    "hostname": _hostname,
    "email": _email,
    "uri": _uri,
    "mac": lambda text: _MAC.match(text) is not None,
    "hexcolor": lambda text: _HEXCOLOR.match(text) is not None,
    "rgbcolor": lambda text: _RGBCOLOR.match(text) is not None,
    "ssn": lambda text: _SSN.match(text) is not None,
    "bsonobjectid": lambda text: _BSON_OBJECT_ID.match(text) is not None,
    "isbn": lambda text: _isbn10(text) or _isbn13(text),
    "isbn10": _isbn10,
    "isbn13": _isbn13,
    "creditcard": _creditcard,
    "k8sshortname": _short_name,
    "k8slongname": _long_name,
}


def known(name: str) -> bool:
    return name.replace("-", "") in _CHECKS


def conforms(name: str, text: str) -> bool:
    """Whether ``text`` is a valid ``name`` (an unknown format accepts anything)."""
    check = _CHECKS.get(name.replace("-", ""))
    return check is None or bool(check(text))
