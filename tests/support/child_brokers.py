"""A child broker as ``stctl standalone`` describes one, and its command line read back the way
``stctl broker`` reads it: for tests that standalone hands its brokers the flags it was given."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from scalable_topics.cli import build_parser
from scalable_topics.commands.broker_children import ChildBroker


def child_broker(tmp_path: Path, **options: Any) -> ChildBroker:
    """Broker 1 of a standalone in ``tmp_path``, with ``options`` (limits, timeouts...)."""
    return ChildBroker(
        broker_id="broker-1",
        data_dir=tmp_path / "broker-1",
        store_url="embedded:///x.db",
        host="127.0.0.1",
        port=0,
        log_path=tmp_path / "broker-1.log",
        address_file=tmp_path / "broker-1.address",
        **options,
    )


def broker_arguments(child: ChildBroker, port: int = 7001) -> argparse.Namespace:
    """The child's command line on ``port``, parsed from its ``broker`` command on."""
    argv = child.argv(port)
    return build_parser().parse_args(argv[argv.index("broker") :])
