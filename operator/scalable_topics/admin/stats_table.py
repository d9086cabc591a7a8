"""Topic stats as the plain-text tables ``stctl topics stats`` prints by default.

It renders the JSON form (``TopicStats.to_dict()``, what the admin API answers), so the CLI can
print what it received without rebuilding the aggregate.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

_MISSING = "-"


def render_table(stats: Mapping[str, Any]) -> str:
    counts, rates = stats["segmentCounts"], stats["rates"]
    lines = [
        f"TOPIC {stats['namespace']}/{stats['name']}  EPOCH {_text(stats['epoch'])}  "
        f"PHASE {_text(stats['phase'])}",
        f"SEGMENTS {counts['active']} active, {counts['sealed']} sealed, "
        f"{counts['unavailable']} unavailable",
        f"TOTALS in {rates['msgRateIn']:.1f} msg/s ({_bytes(rates['byteRateIn'])}/s), "
        f"out {rates['msgRateOut']:.1f} msg/s ({_bytes(rates['byteRateOut'])}/s), "
        f"backlog {stats['backlog']}, size {_bytes(stats['sizeBytes'])}, "
        f"producers {stats['producers']}",
        "",
    ]
    segment_rows = [["ID", "RANGE", "STATE", "MSG/S IN", "MSG/S OUT", "BACKLOG", "SIZE", "BROKER"]]
    for segment in stats["segments"]:
        hash_range = str(segment["descriptor"]).rsplit("-", 1)[0]
        head = [str(segment["id"]), hash_range, str(segment["state"])]
        if not segment["available"]:
            broker = f"{_text(segment['broker'])} (unavailable: {segment['reason']})"
            segment_rows.append([*head, *[_MISSING] * 4, broker])
            continue
        segment_rows.append(
            [
                *head,
                f"{segment['rates']['msgRateIn']:.1f}",
                f"{segment['rates']['msgRateOut']:.1f}",
                str(segment["backlog"]),
                _bytes(segment["sizeBytes"]),
                _text(segment["broker"]),
            ]
        )
    lines.extend(columns(segment_rows))
    if stats["subscriptions"]:
        lines.append("")
        subscription_rows = [
            ["SUBSCRIPTION", "TYPE", "STATE", "BACKLOG", "CONSUMERS", "REGISTERED", "DRAINED"]
        ]
        for sub in stats["subscriptions"]:
            subscription_rows.append(
                [
                    str(sub["name"]),
                    _text(sub["type"]),
                    _text(sub["state"]),
                    str(sub["backlog"]),
                    str(sub["consumers"]),
                    str(sub["registeredConsumers"]),
                    f"{sub['drainedSegments']}/{sub['segments']}",
                ]
            )
        lines.extend(columns(subscription_rows))
    return "\n".join(lines) + "\n"


def columns(rows: Sequence[Sequence[str]]) -> list[str]:
    """Rows as left-aligned columns two spaces apart."""
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    return [
        "  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)).rstrip()
        for row in rows
    ]


def _text(value: object) -> str:
    return _MISSING if value is None else str(value)


def _bytes(size: float) -> str:
    for unit in ("B", "KiB", "MiB", "GiB"):
        if size < 1024:
            return f"{size:.0f} {unit}" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1024
    return f"{size:.1f} TiB"
