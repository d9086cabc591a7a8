"""``python -m scalable_topics.loadjob``'s flags: a bad one is one clear line and exit status 2,
before any Spark starts."""

from __future__ import annotations

from pathlib import Path

import pytest

from scalable_topics.loadjob.cli import main, parser
from scalable_topics.model.rate_windows import DEFAULT_WINDOWS, parse_windows


@pytest.mark.parametrize(
    ("flags", "problem"),
    [
        (["--windows", "2m,2x"], "window '2x' is not a whole number"),
        (["--every", "0"], "'0' must be a number of seconds above 0"),
        (["--ttl", "soon"], "'soon' is not a number of seconds"),
        (["--every", "inf"], "'inf' must be a number of seconds above 0"),
    ],
)
def test_a_bad_flag_is_refused_naming_it(
    flags: list[str], problem: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exited:
        main(["--store", "embedded:store.db", "--history", "h", *flags])
    assert exited.value.code == 2
    assert problem in capsys.readouterr().err


def test_a_store_url_no_adapter_serves_is_refused_before_spark(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["--store", "etcd://somewhere", "--history", "h"]) == 2
    assert "unsupported store URL 'etcd://somewhere'" in capsys.readouterr().err


def test_defaults() -> None:
    args = parser().parse_args(["--store", "embedded:s.db", "--history", "h"])
    assert (args.every, args.ttl, args.master) == (None, None, None)
    assert args.windows == DEFAULT_WINDOWS
    assert args.system_namespace == "scalable-topics"
    custom = parser().parse_args(["--store", "s", "--history", "h", "--windows", "20s,40s"])
    assert custom.windows == parse_windows("20s,40s")


def test_a_store_that_cannot_be_opened_is_one_line_and_status_1(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    store = f"embedded://{tmp_path / 'missing' / 'store.db'}"
    assert main(["--store", store, "--history", str(tmp_path)]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1
    assert f"directory {tmp_path / 'missing'} does not exist" in err
