"""``--store-qps`` and ``--store-burst`` of ``stctl controller``, ``broker`` and ``standalone``:
what they resolve to over the store's default, and clear refusals of what cannot apply."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from scalable_topics.cli import main
from scalable_topics.commands.store_flags import store_budget
from scalable_topics.store import UNLIMITED, BudgetSettings
from scalable_topics.store import url as store_urls
from support.child_brokers import broker_arguments, child_broker

EMBEDDED = "embedded:///var/lib/st/store.db"


@pytest.mark.parametrize(
    ("qps", "burst", "expected"),
    [
        (None, None, UNLIMITED),  # the embedded store's default
        (0.0, None, UNLIMITED),
        (0.0, 0, UNLIMITED),
        (None, 0, UNLIMITED),
        (50.0, None, BudgetSettings(50.0, 50)),  # one second of the rate
        (0.5, None, BudgetSettings(0.5, 1)),
        (2.5, 7, BudgetSettings(2.5, 7)),
    ],
)
def test_flags_over_an_unlimited_default(
    qps: float | None, burst: int | None, expected: BudgetSettings
) -> None:
    assert store_budget(EMBEDDED, qps, burst) == expected


@pytest.mark.parametrize(
    ("qps", "burst", "expected"),
    [
        (None, None, BudgetSettings(5.0, 10)),
        (20.0, None, BudgetSettings(20.0, 10)),  # the store's burst
        (None, 30, BudgetSettings(5.0, 30)),  # the store's rate
        (0.0, None, UNLIMITED),
    ],
)
def test_flags_over_a_limited_default(
    monkeypatch: pytest.MonkeyPatch,
    qps: float | None,
    burst: int | None,
    expected: BudgetSettings,
) -> None:
    """An adapter for a throttling API server keeps limits by default (client-go's are 5 and
    10): the flags change one or both, or lift them."""
    limited = {"embedded": BudgetSettings(5.0, 10)}
    monkeypatch.setattr(store_urls, "DEFAULT_BUDGETS", limited)
    assert store_budget(EMBEDDED, qps, burst) == expected


@pytest.mark.parametrize(
    ("qps", "burst", "message"),
    [
        (0.0, 5, "--store-burst 5 needs a rate: --store-qps 0 is unlimited"),
        (None, 5, "--store-burst 5 needs --store-qps: requests to this store are unlimited"),
        (10.0, 0, "--store-burst must be at least 1 when --store-qps 10 limits it"),
    ],
)
def test_flags_that_cannot_apply_are_refused(
    qps: float | None, burst: int | None, message: str
) -> None:
    with pytest.raises(ValueError, match=message):
        store_budget(EMBEDDED, qps, burst)


def _command(command: str, tmp_path: Path) -> list[str]:
    store = f"embedded://{tmp_path / 'store.db'}"
    return {
        "controller": ["controller", "--store", store],
        "broker": ["broker", "--data-dir", str(tmp_path), "--store", store],
        "standalone": ["standalone", "--data-dir", str(tmp_path)],
    }[command]


COMMANDS = ["controller", "broker", "standalone"]


@pytest.mark.parametrize("command", COMMANDS)
@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (("--store-qps", "-1"), "expected requests per second, a number >= 0"),
        (("--store-qps", "fast"), "expected requests per second"),
        (("--store-qps", "nan"), "expected requests per second"),
        (("--store-qps", "inf"), "expected requests per second"),
        (("--store-burst", "1.5"), "expected a whole number of requests >= 0"),
        (("--store-burst", "-3"), "expected a whole number of requests >= 0"),
    ],
)
def test_malformed_values_are_usage_errors(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    command: str,
    flags: tuple[str, ...],
    message: str,
) -> None:
    with pytest.raises(SystemExit) as exited:
        main([*_command(command, tmp_path), *flags])
    assert exited.value.code == 2
    assert message in capsys.readouterr().err


@pytest.mark.parametrize("command", COMMANDS)
def test_a_burst_without_a_rate_is_one_clear_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], command: str
) -> None:
    assert main([*_command(command, tmp_path), "--store-burst", "5"]) == 2
    err = capsys.readouterr().err
    assert err == (
        f"stctl {command}: --store-burst 5 needs --store-qps: requests to this store are "
        "unlimited by default\n"
    )


@pytest.mark.parametrize("command", COMMANDS)
def test_help_documents_the_flags(command: str, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        main([command, "--help"])
    assert exited.value.code == 0
    text = " ".join(capsys.readouterr().out.split())
    assert "--store-qps QPS" in text and "--store-burst N" in text
    assert "(0: unlimited;" in text and "Requests on Leases go before" in text


def test_standalone_gives_its_child_brokers_the_same_budget(tmp_path: Path) -> None:
    child = child_broker(tmp_path, store_budget=BudgetSettings(2.5, 7))
    argv = child.argv(7001)
    flags = argv[argv.index("--store-qps") :]
    assert flags == ["--store-qps", "2.5", "--store-burst", "7"]
    parsed = broker_arguments(child)
    assert store_budget(parsed.store, parsed.store_qps, parsed.store_burst) == BudgetSettings(
        2.5, 7
    )
    unlimited = dataclasses.replace(child, store_budget=UNLIMITED).argv(7001)
    assert unlimited[unlimited.index("--store-qps") :] == ["--store-qps", "0.0"]
    assert "--store-qps" not in dataclasses.replace(child, store_budget=None).argv(7001)
