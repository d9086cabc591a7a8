"""The load job inside ``stctl standalone``: a supervised child whose runs write each topic's
recommendation and whose output reaches standalone's log; stopped with standalone."""

from __future__ import annotations

import asyncio
import os
import re
import signal
import sys
from pathlib import Path

import pytest

from scalable_topics.commands.load_job_child import load_job_problem
from scalable_topics.model.resources import ScalableTopic
from scalable_topics.store import EmbeddedStore
from support.eventually import eventually

pytestmark = pytest.mark.slow


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


async def test_standalone_runs_the_load_job_and_stops_it(tmp_path: Path) -> None:
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "scalable_topics.cli",
        "standalone",
        "--data-dir",
        str(tmp_path),
        "--port",
        "0",
        "--controller-port",
        "0",
        "--no-kube-api",
        "--load-job-interval",
        "2",
        "--load-job-windows",
        "20s,40s",
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )
    assert process.stdout is not None
    log = tmp_path / "logs" / "standalone.log"
    try:
        async with asyncio.timeout(60):
            while not (await process.stdout.readline()).startswith(b"Stop with Ctrl-C"):
                pass
        async with await EmbeddedStore.open(tmp_path / "store.db") as store:
            await store.create(
                {
                    "apiVersion": "scalabletopics.dev/v1alpha1",
                    "kind": "ScalableTopic",
                    "metadata": {"name": "orders", "namespace": "default"},
                    "spec": {"initialSegments": 2},
                }
            )

            async def recommended() -> bool:
                raw = await store.get(ScalableTopic.KIND, "default", "orders")
                auto = ScalableTopic.model_validate(raw).status.auto_scale
                return auto is not None and auto.recommendation is not None

            await eventually(recommended, "the load job's recommendation", timeout=180)
            raw = await store.get(ScalableTopic.KIND, "default", "orders")
        auto = ScalableTopic.model_validate(raw).status.auto_scale
        assert auto is not None and auto.recommendation is not None
        assert (auto.recommendation.decision, auto.recommendation.source) == ("NoAction", "spark")
        assert re.search(
            r"load job: .* load job run: \d+ rows, \d+ segments, 1 topics", log.read_text()
        )
        [first] = pids(log)
        # A crash is logged and the job started again, standalone carrying on.
        os.killpg(first, signal.SIGKILL)
        await eventually(lambda: len(pids(log)) == 2, "the load job started again", timeout=120)
        assert "load job exited with code -9" in log.read_text()
        [_, pid] = pids(log)
        assert process.returncode is None
    finally:
        process.send_signal(signal.SIGTERM)
        async with asyncio.timeout(90):
            code = await process.wait()
    assert code == 0
    assert not _alive(pid)  # stopped and awaited, not left behind


def pids(log: Path) -> list[int]:
    return [int(p) for p in re.findall(r"load job running as pid (\d+)", log.read_text())]


def test_without_java_there_is_no_load_job_and_it_says_why(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.delenv("JAVA_HOME", raising=False)
    monkeypatch.setenv("PATH", str(tmp_path))  # no java here
    assert load_job_problem() == (
        "Java is not installed (Spark needs a JVM: java on PATH, or JAVA_HOME)"
    )
    monkeypatch.setenv("JAVA_HOME", str(tmp_path / "nowhere"))
    assert load_job_problem() is not None


def test_with_pyspark_and_java_nothing_is_missing() -> None:
    assert load_job_problem() is None


@pytest.mark.parametrize(
    ("flags", "problem"),
    [
        (["--load-job-interval", "-1"], "--load-job-interval must be a number of seconds >= 0"),
        (["--load-job-interval", "nan"], "--load-job-interval must be a number of seconds >= 0"),
        (["--load-job-windows", "5m,300s"], "--load-job-windows: window '300s' is the same"),
    ],
)
def test_standalone_refuses_bad_load_job_flags(
    flags: list[str], problem: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from scalable_topics.cli import main

    assert main(["standalone", "--data-dir", str(tmp_path), *flags]) == 2
    assert problem in capsys.readouterr().err
    assert not (tmp_path / "store.db").exists()  # refused before anything started
