"""No code swallows a CancelledError meant for the task that awaits (see scalable_topics.tasks).

Two shapes did, and each time a cancelled task carried on: an ``except`` clause that catches
CancelledError (or BaseException, or everything) and does not raise again, and
``contextlib.suppress`` of CancelledError (or BaseException) around an await. Stopping a task
is ``tasks.cancel_and_wait``/``cancel_all``/``TaskOwner.close``, which never need either.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "operator" / "scalable_topics"
_CATCH_ALL = {"CancelledError", "BaseException"}


def _names(node: ast.expr | None) -> set[str]:
    """The exception class names an ``except`` or ``suppress`` names (last dotted part)."""
    if node is None:
        return {"BaseException"}  # a bare except
    if isinstance(node, ast.Tuple):
        return set().union(*(_names(element) for element in node.elts))
    if isinstance(node, ast.Name):
        return {node.id}
    if isinstance(node, ast.Attribute):
        if ast.unparse(node) == "concurrent.futures.CancelledError":
            return set()  # a thread's future was cancelled: not a task's cancellation
        return {node.attr}
    return set()


def _raises_again(handler: ast.ExceptHandler) -> bool:
    """Whether the handler ends by raising: a bare ``raise`` (or raising the caught name) as
    its last statement, or in every branch of a final if/else."""

    def ends_in_raise(body: list[ast.stmt]) -> bool:
        if not body:
            return False
        last = body[-1]
        if isinstance(last, ast.Raise):
            return last.exc is None or (
                isinstance(last.exc, ast.Name) and last.exc.id == handler.name
            )
        if isinstance(last, ast.If):
            return ends_in_raise(last.body) and ends_in_raise(last.orelse)
        return False

    return ends_in_raise(handler.body)


def _is_suppress(call: ast.expr) -> bool:
    if not isinstance(call, ast.Call):
        return False
    func = call.func
    return (isinstance(func, ast.Attribute) and func.attr == "suppress") or (
        isinstance(func, ast.Name) and func.id == "suppress"
    )


def findings(source: str, filename: str) -> Iterator[str]:
    for node in ast.walk(ast.parse(source, filename)):
        if isinstance(node, ast.ExceptHandler):
            caught = _names(node.type) & _CATCH_ALL
            if caught and not _raises_again(node):
                yield f"{filename}:{node.lineno}: except {'/'.join(sorted(caught))} without re-raise"
        elif isinstance(node, ast.With | ast.AsyncWith):
            for item in node.items:
                call = item.context_expr
                if _is_suppress(call):
                    assert isinstance(call, ast.Call)
                    caught = set().union(*(_names(arg) for arg in call.args)) & _CATCH_ALL
                    if caught:
                        yield (
                            f"{filename}:{node.lineno}: suppress({'/'.join(sorted(caught))}) "
                            "swallows the caller's cancellation"
                        )


def test_no_code_swallows_a_cancellation() -> None:
    found = [
        finding
        for path in sorted(PACKAGE.rglob("*.py"))
        for finding in findings(path.read_text(), str(path.relative_to(PACKAGE.parent)))
    ]
    assert found == []


@pytest.mark.parametrize(
    "source",
    [
        "try:\n    pass\nexcept asyncio.CancelledError:\n    pass\n",
        "try:\n    pass\nexcept (ValueError, CancelledError):\n    log()\n",
        "try:\n    pass\nexcept BaseException:\n    cleanup()\n",
        "try:\n    pass\nexcept:\n    cleanup()\n",
        "try:\n    pass\nexcept BaseException as e:\n    raise Other() from e\n",
        "with contextlib.suppress(asyncio.CancelledError):\n    await task\n",
        "with suppress(Exception, BaseException):\n    await task\n",
    ],
)
def test_the_check_finds_each_shape(source: str) -> None:
    assert list(findings(f"async def f():\n{_indent(source)}", "example.py"))


@pytest.mark.parametrize(
    "source",
    [
        "try:\n    pass\nexcept asyncio.CancelledError:\n    cleanup()\n    raise\n",
        "try:\n    pass\nexcept BaseException as error:\n    cleanup()\n    raise error\n",
        "try:\n    pass\nexcept Exception:\n    pass\n",
        "with contextlib.suppress(TimeoutError):\n    await event.wait()\n",
        "try:\n    pass\nexcept (RuntimeError, concurrent.futures.CancelledError):\n    pass\n",
    ],
)
def test_the_check_accepts_what_is_safe(source: str) -> None:
    assert not list(findings(f"async def f():\n{_indent(source)}", "example.py"))


def _indent(source: str) -> str:
    return "".join(f"    {line}\n" for line in source.splitlines())
