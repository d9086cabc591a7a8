"""OpenAPI validation of a custom resource against its structural schema, in kube-apiserver's
words: kube-openapi's validators in their order, turned into field errors the way
apiextensions-apiserver turns them (``spec.x: Invalid value: "string": spec.x in body must be of
type integer: "string"``). On update, errors in parts the update left unchanged are dropped
(CRD validation ratcheting)."""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Mapping, Sequence
from typing import Final

import re2

from scalable_topics.kubeapi import field_errors as fe
from scalable_topics.kubeapi import formats
from scalable_topics.kubeapi import structural as st
from scalable_topics.kubeapi.correlation import Correlated
from scalable_topics.kubeapi.go_values import go_fixed, go_float, go_quote
from scalable_topics.kubeapi.status import Cause
from scalable_topics.kubeapi.structural import Schema

_IN: Final = "body"
_MAX_JSON_FLOAT: Final = float(2**53 - 1)
_MAX_FLOAT32: Final = 3.4028235677973366e38  # ParseFloat(s, 32) overflows from here on
_INT_RANGES: Final = {"int32": (-(2**31), 2**31 - 1), "int64": (-(2**63), 2**63 - 1)}

# What a decoded JSON value looks like to kube-openapi's type validator: (type, format).
_TYPE_INFO: Final = {
    "boolean": ("boolean", ""),
    "string": ("string", ""),
    "integer": ("integer", "int64"),
    "number": ("number", "float64"),
    "array": ("array", ""),
    "object": ("object", ""),
}


def validate(schema: Schema, value: object, old: Correlated | None = None) -> list[Cause]:
    """The schema errors of ``value`` (a whole resource); ``old`` correlates it with the stored
    object on update (ratcheting)."""
    return _node(schema, value, "", old)


def is_json_integer(number: float) -> bool:
    """go-openapi's IsFloat64AJSONInteger: whole (or within 1e-9 relative of whole), |x| < 2**53."""
    if math.isnan(number) or math.isinf(number) or abs(number) > _MAX_JSON_FLOAT:
        return False
    rounded = math.floor(abs(number) + 0.5) * (1 if number >= 0 else -1)
    if number == rounded:
        return True
    if rounded == 0:
        return False
    return abs(number - rounded) < 1e-9 * abs(rounded)


def _field(name: str) -> str:
    """The field a kube-openapi error names (its path, without a leading dot)."""
    return name[1:] if name.startswith(".") else name if name != "." else ""


def _in_body(path: str, text: str) -> str:
    return f"{path} in {_IN} {text}"


def _type_error(path: str, type_name: str, found: str) -> Cause:
    return fe.type_invalid(
        _field(path), found, _in_body(path, f"must be of type {type_name}: {go_quote(found)}")
    )


def _node(schema: Schema, value: object, path: str, old: Correlated | None) -> list[Cause]:
    kind = st.json_kind(value)
    errors: list[Cause] = []
    if value is None:
        errors += _type(schema, value, kind, path)
        errors += _enum(schema, value, path)
    else:
        fmt = st.effective_format(schema)
        if st.types(schema) or fmt:
            errors += _type(schema, value, kind, path)
        if kind == "string":
            assert isinstance(value, str)
            errors += _string(schema, value, path)
            if fmt and formats.known(fmt) and not formats.conforms(fmt, value):
                errors.append(
                    fe.type_invalid(
                        _field(path),
                        value,
                        _in_body(path, f"must be of type {fmt}: {go_quote(value)}"),
                    )
                )
        if kind in ("integer", "number"):
            assert isinstance(value, (int, float))
            errors += _number(schema, value, path)
        if kind == "array":
            assert isinstance(value, list)
            errors += _array(schema, value, path, old)
        errors += _enum(schema, value, path)
        if kind == "object":
            assert isinstance(value, dict)
            errors += _object(schema, value, path, old)
    if errors and old is not None and old.unchanged():
        return []
    return errors


def _type(schema: Schema, value: object, kind: str, path: str) -> list[Cause]:
    allowed = st.types(schema)
    if value is None:
        if allowed and not st.nullable(schema):
            return [_type_error(path, ",".join(allowed), "null")]
        return []
    fmt = st.effective_format(schema)
    found_type, found_format = _TYPE_INFO.get(kind, ("", ""))
    float_int = (
        found_type == "number"
        and isinstance(value, float)
        and is_json_integer(value)
        and "integer" in allowed
    )
    int_float = found_type == "integer" and "number" in allowed
    matches_format = found_type in allowed or found_format == fmt or float_int or int_float
    if kind not in ("string", "array") and fmt and not matches_format:
        return [_type_error(path, fmt, found_format)]
    if not ("number" in allowed or "integer" in allowed) and fmt and kind in ("string", "array"):
        return []
    if not (found_type in allowed or float_int or int_float):
        return [_type_error(path, ",".join(allowed), found_type)]
    return []


@functools.lru_cache(maxsize=512)
def _matcher(pattern: str) -> Callable[[str], bool] | str:
    """A search for ``pattern`` with Go's regexp syntax (RE2), or why it does not compile."""
    try:
        compiled = re2.compile(pattern)
    except re2.error as error:
        detail = error.args[0] if error.args else error
        if isinstance(detail, bytes):
            detail = detail.decode(errors="replace")
        return f"error parsing regexp: {detail}"
    return lambda text: compiled.search(text) is not None


def _string(schema: Schema, value: str, path: str) -> list[Cause]:
    """maxLength, minLength, pattern: only the first that fails is reported."""
    length = len(value)
    max_length = schema.get("maxLength")
    if isinstance(max_length, int) and length > max_length:
        return [fe.too_long(_field(path), max_length)]
    min_length = schema.get("minLength")
    if isinstance(min_length, int) and length < min_length:
        detail = _in_body(path, f"should be at least {min_length} chars long")
        return [fe.invalid(_field(path), value, detail)]
    pattern = schema.get("pattern")
    if isinstance(pattern, str) and pattern:
        matches = _matcher(pattern)
        if isinstance(matches, str):
            detail = _in_body(path, f"should match '{pattern}, but pattern is invalid: {matches}'")
            return [fe.invalid(_field(path), value, detail)]
        if not matches(value):
            return [fe.invalid(_field(path), value, _in_body(path, f"should match '{pattern}'"))]
    return []


def _range_error(
    number: int | float, type_name: str, fmt: str, prefix: str, path: str
) -> Cause | None:
    """IsValueValidAgainstRange: does ``number`` fit the schema's numeric type and format? Its
    error names no field (``<nil>: Invalid value: "": Checked value must be of type ...``)."""
    text = str(number) if isinstance(number, int) else go_fixed(number)
    fits = True
    if type_name == "integer":
        low, high = _INT_RANGES["int32" if fmt == "int32" else "int64"]
        try:
            whole = int(text, 10)
        except ValueError:
            fits = False
        else:
            fits = low <= whole <= high
    elif fmt == "float":
        fits = abs(float(number)) < _MAX_FLOAT32
    if fits:
        return None
    described = f"with format {fmt}" if fmt else "(default format)"
    return fe.invalid("", "", f"{prefix} value must be of type {type_name} {described} in {path}")


def _number_bound(value: int | float, bound: int | float) -> tuple[int | float, int | float]:
    """Both sides as kube-openapi compares them: an integer against the truncated bound."""
    if isinstance(value, int):
        return value, int(bound)
    return float(value), float(bound)


def _show(number: int | float) -> str:
    return str(number) if isinstance(number, int) else go_float(number)


def _number(schema: Schema, value: int | float, path: str) -> list[Cause]:
    allowed = st.types(schema)
    type_name = allowed[0] if len(allowed) == 1 and allowed[0] in ("integer", "number") else ""
    fmt = st.effective_format(schema) if type_name else ""
    errors: list[Cause] = []
    checked = _range_error(value, type_name, fmt, "Checked", path)
    if checked is not None:
        errors.append(checked)

    factor = schema.get("multipleOf")
    if isinstance(factor, (int, float)) and not isinstance(factor, bool):
        bad_factor = _range_error(factor, type_name, fmt, "MultipleOf", path)
        if bad_factor is not None:
            errors.append(bad_factor)
        errors += _multiple_of(value if bad_factor is None else float(value), factor, path)

    for keyword, exclusive_keyword, below in (
        ("minimum", "exclusiveMinimum", True),
        ("maximum", "exclusiveMaximum", False),
    ):
        bound = schema.get(keyword)
        if not isinstance(bound, (int, float)) or isinstance(bound, bool):
            continue
        exclusive = schema.get(exclusive_keyword) is True
        bad_bound = _range_error(bound, type_name, fmt, f"{keyword.capitalize()} boundary", path)
        if bad_bound is not None:
            errors.append(bad_bound)
            data, limit = float(value), float(bound)
        else:
            data, limit = _number_bound(value, bound)
        if below:
            failed = data <= limit if exclusive else data < limit
            words = "should be greater than" if exclusive else "should be greater than or equal to"
        else:
            failed = data >= limit if exclusive else data > limit
            words = "should be less than" if exclusive else "should be less than or equal to"
        if failed:
            errors.append(fe.invalid(_field(path), data, _in_body(path, f"{words} {_show(limit)}")))
    return errors


def _multiple_of(value: int | float, factor: int | float, path: str) -> list[Cause]:
    if isinstance(value, int):
        whole_factor = int(factor)
        if whole_factor <= 0:
            detail = f"factor MultipleOf declared for {path} must be positive: {whole_factor}"
            return [fe.invalid(_field(path), whole_factor, detail)]
        quotient = abs(value) // whole_factor * (1 if value >= 0 else -1)
        if quotient * whole_factor == value:
            return []
        return [
            fe.invalid(
                _field(path), value, _in_body(path, f"should be a multiple of {whole_factor}")
            )
        ]
    real_factor = float(factor)
    if real_factor <= 0:
        detail = f"factor MultipleOf declared for {path} must be positive: {go_float(real_factor)}"
        return [fe.invalid(_field(path), real_factor, detail)]
    ratio = 1 / real_factor * value if real_factor < 1 else value / real_factor
    if is_json_integer(ratio):
        return []
    detail = _in_body(path, f"should be a multiple of {go_float(real_factor)}")
    return [fe.invalid(_field(path), float(value), detail)]


def _array(schema: Schema, value: list[object], path: str, old: Correlated | None) -> list[Cause]:
    errors: list[Cause] = []
    item_schema = st.items(schema)
    if item_schema is not None:
        for position, item in enumerate(value):
            child = old.index(position) if old is not None else None
            errors += _node(item_schema, item, f"{path}[{position}]", child)
    size = len(value)
    min_items = schema.get("minItems")
    if isinstance(min_items, int) and size < min_items:
        detail = _in_body(path, f"should have at least {min_items} items")
        errors.append(fe.invalid(_field(path), size, detail))
    max_items = schema.get("maxItems")
    if isinstance(max_items, int) and size > max_items:
        errors.append(fe.too_many(_field(path), size, max_items))
    if schema.get("uniqueItems") is True:
        for position, item in enumerate(value):
            if any(st.deep_equal(item, earlier) for earlier in value[:position]):
                errors.append(
                    fe.invalid(_field(path), "", _in_body(path, "shouldn't contain duplicates"))
                )
                break
    return errors


def _as_go_enum(value: object) -> object:
    """An enum value as the API server holds it: every JSON number a float64."""
    if isinstance(value, bool) or value is None or isinstance(value, str):
        return value
    if isinstance(value, (int, float)):
        return float(value)
    if isinstance(value, Mapping):
        return {k: _as_go_enum(v) for k, v in value.items()}
    if isinstance(value, Sequence):
        return [_as_go_enum(v) for v in value]
    return value


def _enum_match(value: object, allowed: object) -> bool:
    """reflect's ConvertibleTo + DeepEqual, as the enum validator compares."""
    if value is None or allowed is None:
        return False
    if isinstance(allowed, bool) or isinstance(value, bool):
        return isinstance(allowed, bool) and isinstance(value, bool) and value == allowed
    if isinstance(allowed, float):
        return isinstance(value, (int, float)) and float(value) == allowed
    if isinstance(allowed, str):
        if isinstance(value, str):
            return value == allowed
        if isinstance(value, int):  # Go converts an integer to the string of that rune
            valid = 0 <= value <= 0x10FFFF and not 0xD800 <= value <= 0xDFFF
            return (chr(value) if valid else "\ufffd") == allowed
        return False
    return type(value) is type(allowed) and st.deep_equal(value, allowed)


def _enum(schema: Schema, value: object, path: str) -> list[Cause]:
    allowed = schema.get("enum")
    if not isinstance(allowed, list) or not allowed:
        return []
    if any(_enum_match(value, _as_go_enum(option)) for option in allowed):
        return []
    listed = [fe.enum_value(_as_go_enum(option)) for option in allowed]
    return [fe.not_supported(_field(path), value, listed)]


def _object(
    schema: Schema, value: dict[str, object], path: str, old: Correlated | None
) -> list[Cause]:
    errors: list[Cause] = []
    size = len(value)
    min_properties = schema.get("minProperties")
    if isinstance(min_properties, int) and size < min_properties:
        detail = _in_body(path, f"should have at least {min_properties} properties")
        errors.append(fe.invalid(_field(path), size, detail))
    max_properties = schema.get("maxProperties")
    if isinstance(max_properties, int) and size > max_properties:
        errors.append(fe.too_many(_field(path), size, max_properties))

    declared = st.properties(schema)
    if schema.get("additionalProperties") is False:
        for name in value:
            if name not in declared:
                detail = f"{path}.{name} in {_IN} is a forbidden property"
                errors.append(fe.invalid(_field(path), name, detail))
    else:
        values_schema = st.additional(schema)
        if values_schema is not None:
            for name, item in value.items():
                if name not in declared:
                    child = _child(old, name, path)
                    errors += _node(values_schema, item, f"{path}.{name}", child)

    for name, property_schema in declared.items():
        if name in value:
            child = _child(old, name, path)
            errors += _node(property_schema, value[name], f"{path}.{name}" if path else name, child)

    required = schema.get("required")
    for name in required if isinstance(required, list) else ():
        if isinstance(name, str) and name not in value:
            errors.append(fe.required(_field(f"{path}.{name}")))
    return errors


def _child(old: Correlated | None, name: str, path: str) -> Correlated | None:
    """The correlation of a field: at the root, apiVersion and kind are never ratcheted."""
    if old is None or (not path and name in ("apiVersion", "kind")):
        return None
    return old.key(name)
