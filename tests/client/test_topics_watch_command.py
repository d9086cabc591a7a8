"""``stctl topics watch``: the set, then each change, one line each; refusals and brokers too
old for a namespace watch as one line on stderr and exit 1; the context's namespace when -n is
not given. Run as a process against a scripted broker (namespace_fake_broker.py)."""

from __future__ import annotations

import asyncio
import json
import os
import sys
from pathlib import Path

import pytest
from namespace_fake_broker import WAIT, FakeBroker, fake_broker

from scalable_topics.client import write_client_config
from scalable_topics.commands.topics_watch import filters_of
from scalable_topics.protocol import ErrorCode, WatchEnded


async def stctl_watch(*args: str, env: dict[str, str] | None = None) -> asyncio.subprocess.Process:
    return await asyncio.create_subprocess_exec(
        *(sys.executable, "-m", "scalable_topics.cli", "topics", "watch", *args),
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        env={**os.environ, "PYTHONUNBUFFERED": "1", **(env or {})},
    )


async def line_of(process: asyncio.subprocess.Process) -> str:
    assert process.stdout is not None
    async with asyncio.timeout(WAIT):
        line = await process.stdout.readline()
    assert line, "stctl topics watch exited"
    return line.decode().rstrip("\n")


async def finished(process: asyncio.subprocess.Process) -> tuple[int, str, str]:
    try:
        async with asyncio.timeout(WAIT):
            out, err = await process.communicate()
    finally:
        if process.returncode is None:
            process.kill()
            await process.wait()
    assert process.returncode is not None
    return process.returncode, out.decode(), err.decode()


async def watch_two_changes(broker: FakeBroker, *args: str) -> tuple[list[str], str]:
    """Run the command to two changes: a topic created, then one deleted and created again."""
    process = await stctl_watch("--url", broker.url, "--changes", "2", *args)
    lines = [await line_of(process)]
    await broker.next_watch()
    await broker.diff(added=("payments",))
    lines.append(await line_of(process))
    await broker.diff(added=("orders",), removed=("orders",))
    code, rest, err = await finished(process)
    assert code == 0, err
    return lines + rest.splitlines(), err


async def test_it_prints_the_set_then_each_change_and_exits_after_n_changes() -> None:
    async with fake_broker(topics={"orders", "refunds"}) as broker:
        lines, err = await watch_two_changes(broker, "-n", "shop", "--filter", "tier=gold")
        assert broker.watches.empty()  # one watch, never opened again
    assert lines == [
        "shop: 2 topics: orders, refunds",
        "shop: added payments (3 topics)",
        "shop: removed orders; added orders (3 topics)",
    ]
    assert err == ""


async def test_json_output_is_one_object_per_line() -> None:
    async with fake_broker(topics={"orders"}) as broker:
        lines, _ = await watch_two_changes(broker, "-n", "shop", "-o", "json")
    assert [json.loads(line) for line in lines] == [
        {"event": "snapshot", "namespace": "shop", "topics": ["orders"]},
        {
            "event": "change",
            "namespace": "shop",
            "added": ["payments"],
            "removed": [],
            "topics": ["orders", "payments"],
        },
        {
            "event": "change",
            "namespace": "shop",
            "added": ["orders"],
            "removed": ["orders"],
            "topics": ["orders", "payments"],
        },
    ]


async def test_the_namespace_and_filters_reach_the_broker(tmp_path: Path) -> None:
    """Without -n, the context's namespace, as every client command."""
    config = tmp_path / "stctl-config"
    async with fake_broker() as broker:
        write_client_config(config, context="here", service_url=broker.url, namespace="team-a")
        process = await stctl_watch(
            *("--config", str(config), "--filter", "tier=gold", "--filter", "region=eu")
        )
        assert await line_of(process) == "team-a: no topics"
        watch = await broker.next_watch()
        process.terminate()
        await finished(process)
    assert (watch.namespace, watch.filters, watch.current_hash) == (
        "team-a",
        {"tier": "gold", "region": "eu"},
        None,
    )


async def test_a_refused_watch_is_one_line_and_exit_1() -> None:
    async with fake_broker() as broker:
        broker.refusal = WatchEnded(ErrorCode.NOT_AUTHORIZED, "alice may not read namespace shop")
        code, out, err = await finished(await stctl_watch("--url", broker.url, "-n", "shop"))
    assert (code, out) == (1, "")
    assert err == "stctl topics watch: NotAuthorized: alice may not read namespace shop\n"


async def test_a_broker_of_version_1_is_one_line_and_exit_1() -> None:
    async with fake_broker(version=1, name="old") as broker:
        url = broker.url
        code, out, err = await finished(await stctl_watch("--url", url))
    assert (code, out) == (1, "")
    assert err == (
        f"stctl topics watch: {url} (broker old) agreed on protocol version 1; a "
        "namespace watch needs version 2 (this client speaks 2, 1)\n"
    )


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("--filter", "tier"), "argument --filter: expected KEY=VALUE, not 'tier'"),
        (("--changes", "-1"), "argument --changes: expected a number of changes"),
        (("-n", "Shop"), "stctl topics watch: invalid namespace watch: namespace: "),
        (
            ("--filter", "tier=gold", "--filter", "tier=silver"),
            "stctl topics watch: --filter tier is given twice ('gold' and 'silver')",
        ),
    ],
)
async def test_usage_errors_exit_2(args: tuple[str, ...], message: str) -> None:
    code, out, err = await finished(await stctl_watch("--url", "ws://127.0.0.1:1", *args))
    assert (code, out) == (2, "")
    assert message in err


def test_a_filter_given_twice_with_one_value_is_one_filter() -> None:
    assert filters_of([("tier", "gold"), ("tier", "gold"), ("region", "eu")]) == {
        "tier": "gold",
        "region": "eu",
    }
