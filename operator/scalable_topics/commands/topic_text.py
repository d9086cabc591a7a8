"""Topics as people read them: the list table and ``describe``'s page. Pure."""

from __future__ import annotations

from collections.abc import Sequence

from ..admin.stats_table import columns
from ..client.admin_types import (
    Operation,
    SubscriptionDescription,
    TopicDescription,
    TopicSummary,
)
from .output import text

LIST_HEADER = (
    "NAMESPACE",
    "NAME",
    "PHASE",
    "EPOCH",
    "ACTIVE",
    "SEALED",
    "SUBSCRIPTIONS",
    "CONTROLLER",
)


def list_rows(topics: Sequence[TopicSummary]) -> list[list[object]]:
    return [
        [
            t["namespace"],
            t["name"],
            "Deleting" if t["deleting"] else t["phase"],
            t["epoch"],
            t["activeSegments"],
            t["sealedSegments"],
            t["subscriptions"],
            t["controller"],
        ]
        for t in topics
    ]


def operation_line(operation: Operation | None) -> str:
    if operation is None:
        return text(None)
    parents = ",".join(str(i) for i in operation["parentIds"])
    children = ",".join(str(i) for i in operation["childIds"]) or "-"
    line = f"{operation['kind']} {parents} -> {children}: {operation['result']}"
    return f"{line} ({operation['message']})" if operation["message"] else line


def subscription_table(subscriptions: Sequence[SubscriptionDescription]) -> list[str]:
    """DECLARED says ``no (runtime)`` for a subscription a consumer created; SEGMENTS and
    ATTACHED are what the segments' brokers have of it (``-`` when they were not asked),
    CONSUMERS the registrations of stream and checkpoint consumers."""
    rows = [["NAME", "TYPE", "DECLARED", "STATE", "SEGMENTS", "ATTACHED", "CONSUMERS"]]
    for sub in subscriptions:
        consumers = [
            f"{c['name']}[{','.join(str(i) for i in c['assignedSegments'])}]"
            for c in sub["consumers"]
        ]
        segments = sub.get("segments")
        rows.append(
            [
                sub["name"],
                text(sub["type"]),
                _declared(sub),
                text(sub["state"]),
                text(None if segments is None else len(segments)),
                text(sub.get("attachedConsumers")),
                text(consumers),
            ]
        )
    return columns(rows)


def _declared(subscription: SubscriptionDescription) -> str:
    if subscription["declared"]:
        return "yes"
    # Undeclared with a state: the controller is deleting it; without, a consumer made it.
    return "no" if subscription["state"] else "no (runtime)"


def describe_text(topic: TopicDescription) -> str:
    controller = topic["controller"]
    pending = topic["pendingOperation"]
    producer = topic["producer"]
    spec = topic["spec"]
    lines = [
        f"Topic:           {topic['namespace']}/{topic['name']}",
        f"Phase:           {text('Deleting' if topic['deleting'] else topic['phase'])}",
        f"Epoch:           {text(topic['epoch'])}",
        f"Initial:         {spec.get('initialSegments', 1)} segments",
        "Controller:      "
        + (f"{controller['identity']} (term {controller.get('term', 0)})" if controller else "-"),
        "Pending:         "
        + (
            f"{pending['kind']} of {text(pending['parentIds'])}, step {pending['step']}"
            if pending
            else "-"
        ),
        f"Last operation:  {operation_line(topic['lastOperation'])}",
        "Producer:        "
        + (
            f"epoch {producer.get('epoch', 0)}, holder {text(producer.get('holder'))}"
            + (" (claiming: not confirmed yet)" if producer.get("claiming") else "")
            if producer
            else "-"
        ),
    ]
    properties = spec.get("properties") or {}
    if properties:
        lines.append(
            "Properties:      " + ", ".join(f"{k}={v}" for k, v in sorted(properties.items()))
        )
    lines += ["", "Segments:"]
    if topic["segments"]:
        rows = [["ID", "RANGE", "STATE", "PARENTS", "CHILDREN", "BROKER"]]
        for segment in topic["segments"]:
            rows.append(
                [
                    str(segment["id"]),
                    segment["range"],
                    segment["state"],
                    text(segment["parents"]),
                    text(segment["children"]),
                    text(segment["broker"]),
                ]
            )
        lines += ["  " + line for line in columns(rows)]
    else:
        lines.append("  none yet: no controller has created the topic")
    lines += ["", "Subscriptions:"]
    if topic["subscriptions"]:
        lines += ["  " + line for line in subscription_table(topic["subscriptions"])]
    else:
        lines.append("  none")
    return "\n".join(lines) + "\n"
