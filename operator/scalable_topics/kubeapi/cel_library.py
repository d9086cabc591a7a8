"""The CEL functions Kubernetes gives x-kubernetes-validations rules, on top of celpy: CEL's
heterogeneous equality and cross-type numeric comparisons, cel-go's runtime error texts, the
strings, lists, regex, sets and optional libraries; and the rewrites celpy's parser needs
(``sets.contains(...)``, ``has(x.f)`` that fails on a missing ``x``)."""

from __future__ import annotations

import itertools
import operator
from collections.abc import Callable
from typing import Any, Final

import celpy
import lark
import re2
from celpy import celtypes
from celpy.evaluation import CELEvalError

from scalable_topics.kubeapi.cel_values import Optional, cel_equal, is_bool, is_number

CELFunction = Callable[..., Any]
Tree = lark.Tree[lark.Token]

# Namespaces whose functions are called as ``namespace.function(...)``.
NAMESPACES: Final = frozenset({"optional", "sets", "lists", "strings", "math"})
# Macros: methods whose first argument names a variable bound in the others.
COMPREHENSIONS: Final = frozenset({"all", "exists", "exists_one", "map", "filter"})
# Identifiers that are types (``type(x) == int``).
TYPE_NAMES: Final = frozenset(
    [
        "int",
        "uint",
        "double",
        "bool",
        "string",
        "bytes",
        "list",
        "map",
        "null_type",
        "type",
        "timestamp",
        "duration",
        "dyn",
    ]
)
# Kubernetes CEL functions this server does not provide: a rule using one is refused.
UNSUPPORTED: Final = frozenset(
    [
        "url",
        "isURL",
        "ip",
        "isIP",
        "cidr",
        "isCIDR",
        "quantity",
        "isQuantity",
        "semver",
        "isSemver",
        "format",
        "authorizer",
        "base64.encode",
        "base64.decode",
        "strings.quote",
        "math.greatest",
        "math.least",
        "lists.range",
    ]
)


def _error(message: str) -> CELEvalError:
    return CELEvalError(message)


def _no_overload() -> CELEvalError:
    return _error("no such overload")


def _check_errors(*values: object) -> CELEvalError | None:
    for value in values:
        if isinstance(value, CELEvalError):
            return value
    return None


def _whole(value: object) -> int | None:
    """An integer argument (CEL int or uint), or None."""
    if isinstance(value, int) and not is_bool(value):
        return int(value)
    return None


def _equal(a: object, b: object) -> Any:
    return _check_errors(a, b) or celtypes.BoolType(cel_equal(a, b))


def _not_equal(a: object, b: object) -> Any:
    return _check_errors(a, b) or celtypes.BoolType(not cel_equal(a, b))


def _orderable(a: object, b: object) -> bool:
    if is_number(a) and is_number(b):
        return True
    if is_bool(a) and is_bool(b):
        return True
    for kind in (str, bytes, celtypes.TimestampType, celtypes.DurationType):
        if isinstance(a, kind) and isinstance(b, kind):
            return True
    return False


def _ordering(compare: Callable[[Any, Any], bool]) -> CELFunction:
    """A relation with cross-type numeric comparisons (``1 < 2.5``), as Kubernetes enables."""

    def relation(a: object, b: object) -> Any:
        failed = _check_errors(a, b)
        if failed is not None:
            return failed
        if not _orderable(a, b):
            return _no_overload()
        if is_bool(a):
            return celtypes.BoolType(compare(bool(a), bool(b)))
        if is_number(a):
            assert isinstance(a, (int, float)) and isinstance(b, (int, float))
            left = int(a) if isinstance(a, int) else float(a)
            right = int(b) if isinstance(b, int) else float(b)
            return celtypes.BoolType(compare(left, right))
        if isinstance(a, str):
            return celtypes.BoolType(compare(str(a), str(b)))
        if isinstance(a, bytes):
            assert isinstance(b, bytes)
            return celtypes.BoolType(compare(bytes(a), bytes(b)))
        return celtypes.BoolType(compare(a, b))

    return relation


def _index(container: object, position: object) -> Any:
    failed = _check_errors(container, position)
    if failed is not None:
        return failed
    if isinstance(container, list):
        whole = _whole(position)
        if whole is None and isinstance(position, float) and position.is_integer():
            whole = int(position)
        if whole is None:
            return _no_overload()
        if not 0 <= whole < len(container):
            return _error(f"index out of bounds: {whole}")
        return container[whole]
    if isinstance(container, dict):
        for key, value in container.items():
            if cel_equal(key, position):
                return value
        return _error(f"no such key: {position}")
    return _no_overload()


def _int_operation(name: str, fallback: Callable[[Any, Any], Any]) -> CELFunction:
    def operation(a: object, b: object) -> Any:
        failed = _check_errors(a, b)
        if failed is not None:
            return failed
        if (
            isinstance(a, (celtypes.IntType, celtypes.UintType))
            and isinstance(b, (celtypes.IntType, celtypes.UintType))
            and int(b) == 0
        ):
            return _error(f"{name} by zero")
        try:
            return fallback(a, b)
        except ValueError:
            return _error("integer overflow")
        except TypeError:
            return _no_overload()

    return operation


def _arithmetic(fallback: Callable[[Any, Any], Any]) -> CELFunction:
    def operation(a: object, b: object) -> Any:
        failed = _check_errors(a, b)
        if failed is not None:
            return failed
        if is_number(a) != is_number(b) or (is_number(a) and type(a) is not type(b)):
            return _no_overload()
        try:
            return fallback(a, b)
        except ValueError:
            return _error("integer overflow")
        except TypeError:
            return _no_overload()

    return operation


# -- strings (cel-go ext.Strings) --------------------------------------------------------------


def _string_args(*values: object) -> bool:
    return all(isinstance(v, str) for v in values)


def _char_at(text: object, position: object) -> Any:
    whole = _whole(position)
    if not isinstance(text, str) or whole is None:
        return _no_overload()
    if whole < 0 or whole > len(text):
        return _error(f"index out of range: {whole}")
    return celtypes.StringType(text[whole : whole + 1])


def _index_of(target: object, item: object, offset: object = 0) -> Any:
    if isinstance(target, list):
        for position, element in enumerate(target):
            if cel_equal(element, item):
                return celtypes.IntType(position)
        return celtypes.IntType(-1)
    start = _whole(offset)
    if not isinstance(target, str) or not isinstance(item, str) or start is None:
        return _no_overload()
    if start < 0 or start > len(target):
        return _error(f"index out of range: {start}")
    return celtypes.IntType(target.find(item, start))


def _last_index_of(target: object, item: object, offset: object = None) -> Any:
    if isinstance(target, list):
        for position in range(len(target) - 1, -1, -1):
            if cel_equal(target[position], item):
                return celtypes.IntType(position)
        return celtypes.IntType(-1)
    if not isinstance(target, str) or not isinstance(item, str):
        return _no_overload()
    if offset is None:
        return celtypes.IntType(target.rfind(item))
    end = _whole(offset)
    if end is None:
        return _no_overload()
    if end < 0 or end > len(target):
        return _error(f"index out of range: {end}")
    return celtypes.IntType(target.rfind(item, 0, end + len(item)))


def _ascii_case(convert: Callable[[str], str]) -> CELFunction:
    def change(text: object) -> Any:
        if not isinstance(text, str):
            return _no_overload()
        return celtypes.StringType("".join(convert(c) if c.isascii() else c for c in text))

    return change


def _replace(text: object, old: object, new: object, count: object = -1) -> Any:
    limit = _whole(count)
    if not _string_args(text, old, new) or limit is None:
        return _no_overload()
    return celtypes.StringType(str(text).replace(str(old), str(new), limit if limit >= 0 else -1))


def _split(text: object, separator: object, count: object = -1) -> Any:
    limit = _whole(count)
    if not _string_args(text, separator) or limit is None:
        return _no_overload()
    if limit == 0:
        return celtypes.ListType([])
    source, sep = str(text), str(separator)
    parts = list(source) if sep == "" else source.split(sep, limit - 1 if limit > 0 else -1)
    if sep == "" and limit > 0 and len(parts) > limit:
        parts = [*parts[: limit - 1], "".join(parts[limit - 1 :])]
    return celtypes.ListType([celtypes.StringType(p) for p in parts])


def _substring(text: object, start: object, end: object = None) -> Any:
    begin = _whole(start)
    finish = len(text) if end is None and isinstance(text, str) else _whole(end)
    if not isinstance(text, str) or begin is None or finish is None:
        return _no_overload()
    if begin < 0 or begin > len(text):
        return _error(f"index out of range: {begin}")
    if finish < 0 or finish > len(text):
        return _error(f"index out of range: {finish}")
    if begin > finish:
        return _error(f"invalid substring range. start: {begin}, end: {finish}")
    return celtypes.StringType(text[begin:finish])


def _trim(text: object) -> Any:
    return celtypes.StringType(text.strip()) if isinstance(text, str) else _no_overload()


def _join(items: object, separator: object = "") -> Any:
    if not isinstance(items, list) or not isinstance(separator, str):
        return _no_overload()
    if not all(isinstance(item, str) for item in items):
        return _no_overload()
    return celtypes.StringType(str(separator).join(items))


# -- lists (Kubernetes' lists library, cel-go ext.Lists) ---------------------------------------


def _comparable_list(items: object) -> list[Any] | CELEvalError:
    if not isinstance(items, list):
        return _no_overload()
    for first, second in itertools.pairwise(items):
        if not _orderable(first, second):
            return _no_overload()
    return items


def _is_sorted(items: object) -> Any:
    checked = _comparable_list(items)
    if isinstance(checked, CELEvalError):
        return checked
    less = _ordering(operator.lt)
    return celtypes.BoolType(all(not less(b, a) for a, b in itertools.pairwise(checked)))


def _sum(items: object) -> Any:
    if not isinstance(items, list) or not all(is_number(i) for i in items):
        return _no_overload()
    if not items:
        return celtypes.IntType(0)
    total = items[0]
    for item in items[1:]:
        total = total + item
    return total


def _extreme(pick_max: bool) -> CELFunction:
    def choose(items: object) -> Any:
        checked = _comparable_list(items)
        if isinstance(checked, CELEvalError):
            return checked
        if not checked:
            return _error(f"{'max' if pick_max else 'min'} called on empty list")
        less = _ordering(operator.lt)
        best = checked[0]
        for item in checked[1:]:
            if bool(less(best, item) if pick_max else less(item, best)):
                best = item
        return best

    return choose


def _slice(items: object, start: object, end: object) -> Any:
    begin, finish = _whole(start), _whole(end)
    if not isinstance(items, list) or begin is None or finish is None:
        return _no_overload()
    if begin < 0 or finish < 0:
        return _error(f"cannot slice({begin}, {finish}), negative indexes not supported")
    if begin > finish:
        return _error(
            f"cannot slice({begin}, {finish}), start index must be less than or equal to end index"
        )
    if finish > len(items):
        return _error(f"cannot slice({begin}, {finish}), list is length {len(items)}")
    return celtypes.ListType(items[begin:finish])


def _flatten(items: object, depth: object = 1) -> Any:
    levels = _whole(depth)
    if not isinstance(items, list) or levels is None:
        return _no_overload()
    if levels < 0:
        return _error("level must be non-negative")
    result: list[Any] = []
    for item in items:
        if isinstance(item, list) and levels > 0:
            inner = _flatten(celtypes.ListType(item), celtypes.IntType(levels - 1))
            result.extend(inner)
        else:
            result.append(item)
    return celtypes.ListType(result)


# -- regex (Kubernetes' regex library) ---------------------------------------------------------


def _find(text: object, pattern: object) -> Any:
    if not _string_args(text, pattern):
        return _no_overload()
    try:
        found = re2.search(str(pattern), str(text))
    except re2.error:
        return _error(f"error parsing regexp: {pattern}")
    return celtypes.StringType(found.group(0) if found else "")


def _find_all(text: object, pattern: object, limit: object = -1) -> Any:
    most = _whole(limit)
    if not _string_args(text, pattern) or most is None:
        return _no_overload()
    try:
        matches = [m.group(0) for m in re2.finditer(str(pattern), str(text))]
    except re2.error:
        return _error(f"error parsing regexp: {pattern}")
    if most >= 0:
        matches = matches[:most]
    return celtypes.ListType([celtypes.StringType(m) for m in matches])


# -- sets (cel-go ext.Sets) --------------------------------------------------------------------


def _sets_contains(items: object, subset: object) -> Any:
    if not isinstance(items, list) or not isinstance(subset, list):
        return _no_overload()
    return celtypes.BoolType(all(any(cel_equal(s, i) for i in items) for s in subset))


def _sets_equivalent(a: object, b: object) -> Any:
    if not isinstance(a, list) or not isinstance(b, list):
        return _no_overload()
    return celtypes.BoolType(bool(_sets_contains(a, b)) and bool(_sets_contains(b, a)))


def _sets_intersects(a: object, b: object) -> Any:
    if not isinstance(a, list) or not isinstance(b, list):
        return _no_overload()
    return celtypes.BoolType(any(cel_equal(x, y) for x in a for y in b))


# -- optional types ----------------------------------------------------------------------------


def _optional_of(value: object) -> Any:
    return Optional(value, present=True)


def _optional_none() -> Any:
    return Optional()


def _zero(value: object) -> bool:
    if value is None or is_bool(value):
        return not value
    if isinstance(value, (int, float, str, bytes, list, dict)):
        return not value
    return False


def _optional_of_non_zero(value: object) -> Any:
    return Optional() if _zero(value) else Optional(value, present=True)


def _has_value(option: object) -> Any:
    return celtypes.BoolType(option.present) if isinstance(option, Optional) else _no_overload()


def _value(option: object) -> Any:
    if not isinstance(option, Optional):
        return _no_overload()
    return option.value if option.present else _error("optional.none() dereference")


def _or_value(option: object, fallback: object) -> Any:
    if not isinstance(option, Optional):
        return _no_overload()
    return option.value if option.present else fallback


def _or(option: object, other: object) -> Any:
    if not isinstance(option, Optional) or not isinstance(other, Optional):
        return _no_overload()
    return option if option.present else other


def _has(target: object, name: object) -> Any:
    """``has(target.name)``: a missing ``target`` is an error, a missing field is false."""
    if isinstance(target, CELEvalError):
        return target
    if isinstance(target, dict):
        return celtypes.BoolType(celtypes.StringType(str(name)) in target)
    return _no_overload()


FUNCTIONS: Final[dict[str, CELFunction]] = {
    "_==_": _equal,
    "_!=_": _not_equal,
    "_<_": _ordering(operator.lt),
    "_<=_": _ordering(operator.le),
    "_>_": _ordering(operator.gt),
    "_>=_": _ordering(operator.ge),
    "_[_]": _index,
    "_/_": _int_operation("division", operator.truediv),
    "_%_": _int_operation("modulus", operator.mod),
    "_+_": _arithmetic(operator.add),
    "_-_": _arithmetic(operator.sub),
    "_*_": _arithmetic(operator.mul),
    "dyn": lambda value: value,
    "charAt": _char_at,
    "indexOf": _index_of,
    "lastIndexOf": _last_index_of,
    "lowerAscii": _ascii_case(str.lower),
    "upperAscii": _ascii_case(str.upper),
    "replace": _replace,
    "split": _split,
    "substring": _substring,
    "trim": _trim,
    "join": _join,
    "isSorted": _is_sorted,
    "sum": _sum,
    "min": _extreme(pick_max=False),
    "max": _extreme(pick_max=True),
    "slice": _slice,
    "flatten": _flatten,
    "find": _find,
    "findAll": _find_all,
    "sets.contains": _sets_contains,
    "sets.equivalent": _sets_equivalent,
    "sets.intersects": _sets_intersects,
    "optional.of": _optional_of,
    "optional.none": _optional_none,
    "optional.ofNonZeroValue": _optional_of_non_zero,
    "hasValue": _has_value,
    "value": _value,
    "orValue": _or_value,
    "or": _or,
    "__has__": _has,
}

# Every function a rule may call: celpy's own and the ones above (and the macros).
KNOWN_FUNCTIONS: Final = (
    frozenset(celpy.evaluation.base_functions) | frozenset(FUNCTIONS) | COMPREHENSIONS | {"has"}
)


def _wrap(member: Tree) -> Tree:
    """A ``member`` subtree as a whole expression (the chain of rules celpy's parser keeps)."""
    tree: Tree = lark.Tree("unary", [member], meta=member.meta)
    for rule in (
        "multiplication",
        "addition",
        "relation",
        "conditionaland",
        "conditionalor",
        "expr",
    ):
        tree = lark.Tree(rule, [tree], meta=member.meta)
    return tree


def _single(tree: Tree, path: tuple[str, ...]) -> Tree | None:
    """Follow single-child rules ``path`` down from ``tree``."""
    for rule in path:
        children = [c for c in tree.children if c is not None]
        if tree.data != rule or len(children) != 1 or not isinstance(children[0], lark.Tree):
            return None
        tree = children[0]
    return tree


_TO_MEMBER: Final = (
    "expr",
    "conditionalor",
    "conditionaland",
    "relation",
    "addition",
    "multiplication",
    "unary",
)


def rewrite(tree: Tree) -> None:
    """Rewrite, in place, what celpy's parser reads differently from cel-go:
    ``sets.contains(a, b)`` calls the function ``sets.contains``, and ``has(x.f)`` evaluates
    ``x`` (so a missing ``x`` is an error, as in cel-go)."""
    for node in list(tree.iter_subtrees()):
        if node.data == "member_dot_arg":
            target, name = node.children[0], node.children[1]
            primary = _single(target, ("member",)) if isinstance(target, lark.Tree) else None
            ident = _single(primary, ("primary",)) if primary is not None else None
            if (
                ident is not None
                and ident.data == "ident"
                and str(ident.children[0]) in NAMESPACES
                and isinstance(name, lark.Token)
            ):
                qualified = lark.Token("IDENT", f"{ident.children[0]}.{name}")
                rest = [c for c in node.children[2:] if c is not None]
                call: Tree = lark.Tree("ident_arg", [qualified, *rest], meta=node.meta)
                node.data = "primary"
                node.children = [call]
        elif node.data == "ident_arg" and str(node.children[0]) == "has" and len(node.children) > 1:
            arguments = node.children[1]
            if not isinstance(arguments, lark.Tree) or len(arguments.children) != 1:
                continue
            argument = arguments.children[0]
            member = _single(argument, _TO_MEMBER) if isinstance(argument, lark.Tree) else None
            select = _single(member, ("member",)) if member is not None else None
            if select is None or select.data != "member_dot":
                continue
            target, field = select.children
            if not isinstance(target, lark.Tree) or not isinstance(field, lark.Token):
                continue
            literal = lark.Tree(
                "member",
                [
                    lark.Tree(
                        "primary",
                        [lark.Tree("literal", [lark.Token("STRING_LIT", repr(str(field)))])],
                    )
                ],
                meta=select.meta,
            )
            node.children = [
                lark.Token("IDENT", "__has__"),
                lark.Tree("exprlist", [_wrap(target), _wrap(literal)], meta=arguments.meta),
            ]
