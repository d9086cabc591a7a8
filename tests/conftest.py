"""Fixtures for every test folder (what they share beyond fixtures is in tests/support), and a
run-wide check: a task whose failure nobody retrieved, or a task destroyed while pending,
fails the run.

asyncio reports both only when the task is garbage collected ("Task exception was never
retrieved", "Task was destroyed but it is pending!": a task nobody owns, waiting for something
nobody will ever do), which makes the defect easy to miss in a passing run. Here every test
ends with a collection, and a report logged in this process during the test fails it; the log
files the test's child processes (brokers, controllers) wrote under its ``tmp_path`` are read
too. A report that comes later (a task collected during another test, a child of a session
fixture) fails the whole run at its end.

Hypothesis runs without its per-example deadline (200 ms by default) and without its
too-slow health check: both are timing assertions, which fail a correct test on a loaded
machine (one merge-patch property did once). A test still sets its own example count.
"""

from __future__ import annotations

import gc
import logging
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings

from scalable_topics.store import EmbeddedStore

settings.register_profile(
    "scalable-topics", deadline=None, suppress_health_check=[HealthCheck.too_slow]
)
settings.load_profile("scalable-topics")

ORPHANED_TASK_REPORTS = (
    "Task exception was never retrieved",
    "Task was destroyed but it is pending",
)


class _OrphanedFailures(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.ERROR)
        self.reports: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        message = record.getMessage()
        if message.startswith(ORPHANED_TASK_REPORTS):
            self.reports.append(self.format(record))


_handler = _OrphanedFailures()
_late_reports: list[str] = []


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--e2e-target",
        choices=("local", "kind"),
        default="local",
        help="where tests/e2e runs its scenarios: local (operator and broker processes on a "
        "kube-api of our own, the default) or kind (the cluster of $KUBECONFIG, deployed with "
        "make deploy)",
    )


def pytest_configure(config: pytest.Config) -> None:
    logging.getLogger("asyncio").addHandler(_handler)


def _child_reports(directory: Path) -> list[str]:
    reports = []
    for path in directory.rglob("*.log"):
        try:
            text = path.read_text(errors="replace")
        except OSError:
            continue
        for report in ORPHANED_TASK_REPORTS:
            if report in text:
                start = text.index(report)
                reports.append(f"{path.name}: {text[start : start + 2000]}")
    return reports


@pytest.fixture(autouse=True)
def _no_orphaned_task_failures(request: pytest.FixtureRequest) -> Iterator[None]:
    before = len(_handler.reports)
    yield
    gc.collect()
    reports = _handler.reports[before:]
    tmp_path = request.node.funcargs.get("tmp_path")
    if isinstance(tmp_path, Path) and tmp_path.exists():
        reports += _child_reports(tmp_path)
    if reports:
        _late_reports.extend(reports)  # reported once more at the end of the run
        pytest.fail(
            "a task failed and nobody retrieved its exception, or was destroyed pending:\n"
            + "\n".join(reports),
            pytrace=False,
        )


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    gc.collect()
    reports = [r for r in _handler.reports if r not in _late_reports]
    factory = getattr(session.config, "_tmp_path_factory", None)
    if factory is not None:
        try:
            base = factory.getbasetemp()
        except (OSError, ValueError):
            base = None
        if base is not None:
            reports += [r for r in _child_reports(base) if r not in _late_reports]
    if reports:
        terminal = session.config.pluginmanager.get_plugin("terminalreporter")
        if terminal is not None:
            terminal.section(
                "tasks whose failure nobody retrieved, or destroyed pending", sep="=", red=True
            )
            for report in reports:
                terminal.write_line(report)
        session.exitstatus = pytest.ExitCode.TESTS_FAILED


@pytest.fixture(autouse=True, scope="session")
def _no_client_settings_of_the_user(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """stctl and the client read $STCTL_URL, $STCTL_AUTH_TOKEN, $STCTL_CONFIG and
    ~/.config/stctl/config (under $XDG_CONFIG_HOME): none of the user's reaches a test or the
    processes it starts, and nothing a test runs writes there."""
    with pytest.MonkeyPatch.context() as patch:
        for variable in ("STCTL_CONFIG", "STCTL_URL", "STCTL_AUTH_TOKEN"):
            patch.delenv(variable, raising=False)
        patch.setenv("XDG_CONFIG_HOME", str(tmp_path_factory.mktemp("xdg-config-home")))
        yield


@pytest.fixture
async def store(tmp_path: Path) -> AsyncIterator[EmbeddedStore]:
    """An embedded store on a fresh file (folders with a store of their own override it)."""
    async with await EmbeddedStore.open(tmp_path / "store.db") as opened:
        yield opened
