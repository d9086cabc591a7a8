"""``stctl watch``: print a topic's DAG now and at every change, until interrupted."""

from __future__ import annotations

import argparse
import functools
import json
import operator
import sys

from ..client import Client
from ..client.topic_layout import TopicLayout
from ..model.segment import SegmentState
from .admin_call import add_connection_arguments, add_output_argument, add_topic_name, topic_of
from .client_call import run_client

COMMAND = "stctl watch"


def layout_line(layout: TopicLayout) -> str:
    """One line per layout: the epoch, the Active segments with their ranges and brokers, and
    the sealed ones still in the DAG."""
    active = " ".join(
        f"{s.segment_id}:{s.hash_range.start:04x}-{s.hash_range.end:04x}@{s.broker_url or '-'}"
        for s in layout.active
    )
    sealed = sorted(
        s.segment_id for s in layout.segments.values() if s.state is SegmentState.SEALED
    )
    return f"epoch {layout.epoch}: active {active}; sealed {sealed or '-'}"


def layout_json(layout: TopicLayout) -> str:
    return json.dumps(
        {
            "epoch": layout.epoch,
            "controller": layout.controller_endpoint,
            "segments": [
                {
                    "id": s.segment_id,
                    "range": [s.hash_range.start, s.hash_range.end],
                    "state": str(s.state),
                    "parents": list(s.parent_ids),
                    "children": list(s.child_ids),
                    "broker": s.broker_url,
                }
                for s in sorted(layout.segments.values())
            ],
        }
    )


def _run(args: argparse.Namespace) -> int:
    render = layout_json if args.output == "json" else layout_line

    async def work(client: Client) -> int:
        watcher = await client.watch(topic_of(args))
        shown = watcher.layout
        print(render(shown), flush=True)
        for _ in range(args.changes - 1 if args.changes else sys.maxsize):
            # NotFound once the topic is deleted: one line on stderr, exit 1.
            shown = await watcher.wait_for(functools.partial(operator.ne, shown))
            print(render(shown), flush=True)
        return 0

    return run_client(args, COMMAND, work)


def add_watch(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    watch = commands.add_parser(
        "watch",
        help="print a topic's segments now and at every split, merge or move",
        description="Print the topic's DAG (epoch, Active segments with their hash ranges and "
        "brokers, sealed segments) now and whenever it changes, until interrupted.",
    )
    add_topic_name(watch)
    watch.add_argument(
        "--changes", type=int, default=0, help="exit after this many layouts (default: never)"
    )
    add_output_argument(watch)
    add_connection_arguments(watch)
    watch.set_defaults(run=_run)
