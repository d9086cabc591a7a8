"""Topic stats as the plain-text tables ``stctl topics stats`` prints by default."""

from __future__ import annotations

from collections.abc import Sequence

from .stats import TopicStats

_MISSING = "-"


def render_table(stats: TopicStats) -> str:
    lines = [
        f"TOPIC {stats.namespace}/{stats.name}  EPOCH {_text(stats.epoch)}  "
        f"PHASE {_text(stats.phase)}",
        f"SEGMENTS {stats.active_segments} active, {stats.sealed_segments} sealed, "
        f"{stats.unavailable_segments} unavailable",
        f"TOTALS in {stats.rates.msg_rate_in:.1f} msg/s ({_bytes(stats.rates.byte_rate_in)}/s), "
        f"out {stats.rates.msg_rate_out:.1f} msg/s ({_bytes(stats.rates.byte_rate_out)}/s), "
        f"backlog {stats.backlog}, size {_bytes(stats.size_bytes)}, producers {stats.producers}",
        "",
    ]
    segment_rows = [["ID", "RANGE", "STATE", "MSG/S IN", "MSG/S OUT", "BACKLOG", "SIZE", "BROKER"]]
    for segment in stats.segments:
        report = segment.report
        hash_range = segment.descriptor.rsplit("-", 1)[0]
        if report is None:
            segment_rows.append(
                [
                    str(segment.segment_id),
                    hash_range,
                    segment.state,
                    _MISSING,
                    _MISSING,
                    _MISSING,
                    _MISSING,
                    f"{_text(segment.broker)} (unavailable: {segment.unavailable})",
                ]
            )
            continue
        segment_rows.append(
            [
                str(segment.segment_id),
                hash_range,
                segment.state,
                f"{report.rates.msg_rate_in:.1f}",
                f"{report.rates.msg_rate_out:.1f}",
                str(report.backlog),
                _bytes(report.size_bytes),
                _text(segment.broker),
            ]
        )
    lines.extend(_columns(segment_rows))
    if stats.subscriptions:
        lines.append("")
        subscription_rows = [
            ["SUBSCRIPTION", "TYPE", "STATE", "BACKLOG", "CONSUMERS", "REGISTERED", "DRAINED"]
        ]
        for sub in stats.subscriptions:
            subscription_rows.append(
                [
                    sub.name,
                    _text(sub.type),
                    _text(sub.state),
                    str(sub.backlog),
                    str(sub.consumers),
                    str(sub.registered_consumers),
                    f"{sub.drained_segments}/{sub.segments}",
                ]
            )
        lines.extend(_columns(subscription_rows))
    return "\n".join(lines) + "\n"


def _columns(rows: Sequence[Sequence[str]]) -> list[str]:
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
