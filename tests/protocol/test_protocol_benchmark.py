"""Codec throughput on the hot path, printed for the record (run with -s); never asserted."""

from __future__ import annotations

import time

from scalable_topics.protocol import BatchMessage, Send, decode_frame, encode_frame

BATCH = 100
PAYLOAD_BYTES = 100


def test_send_frame_codec_throughput() -> None:
    send = Send(
        producer_id=1,
        sequence_id=1_000,
        messages=tuple(
            BatchMessage(bytes([i]) * PAYLOAD_BYTES, key=f"key-{i}") for i in range(BATCH)
        ),
    )
    frame = encode_frame(send)
    assert decode_frame(frame) == send
    rounds = 300
    started = time.perf_counter()
    for _ in range(rounds):
        decode_frame(encode_frame(send))
    elapsed = time.perf_counter() - started
    rate = rounds * BATCH / elapsed
    print(
        f"\nSend frame of {BATCH} x {PAYLOAD_BYTES} B messages ({len(frame)} B): "
        f"encode+decode {rate:,.0f} msgs/s"
    )
