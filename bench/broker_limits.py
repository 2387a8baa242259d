"""How long one hostile CreateTopics frame blocks a broker's event loop, and what it answers.

Starts a standalone broker in this process, on an event loop of its own thread, with a probe
task that wakes every millisecond and keeps the longest stall of that loop. For each case it
sends one frame of about `--frame-bytes` on a fresh connection and records the round trip,
the time the broker spent handling the frame (decode, checks, response), the loop's longest
stall, and the answer. Before issue 17 item 5 the first case (one topic, a megabyte of
duplicate config entries, the quadratic duplicate check) blocked the loop for 14.4 s.
Prints one JSON line per case, then a table.

    .venv/bin/python bench/broker_limits.py [--frame-bytes 1048576] [--repeat 3]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import socket
import struct
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from system_under_test.client.connection import REQUEST_VERSIONS, decode_response
from system_under_test.config import BrokerConfig
from system_under_test.errors import ErrorCode
from system_under_test.kafka.create_topics import (
    CreatableTopic,
    CreatableTopicConfig,
    CreateTopicsRequest,
    CreateTopicsResponse,
)
from system_under_test.kafka.framing import decode_request, encode_request
from system_under_test.server import Broker
from system_under_test.topic_spec import MAX_CONFIGS_PER_TOPIC

BEFORE_S = 14.4
"""The loop stall of the duplicate-configs case before the fix (issue 17, item 5)."""
PROBE_INTERVAL_S = 0.001


class LoopProbe:
    """Wakes every millisecond on the broker's loop; keeps the longest stall since reset()."""

    def __init__(self) -> None:
        self.longest_s = 0.0

    def reset(self) -> None:
        self.longest_s = 0.0

    async def run(self) -> None:
        loop = asyncio.get_running_loop()
        while True:
            before = loop.time()
            await asyncio.sleep(PROBE_INTERVAL_S)
            self.longest_s = max(self.longest_s, loop.time() - before - PROBE_INTERVAL_S)


class BenchBroker:
    """A standalone Broker on its own loop thread, with the probe and a timed frame handler."""

    def __init__(self, log_dir: Path) -> None:
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.thread.start()
        config = BrokerConfig({"log.dirs": str(log_dir), "listeners": "127.0.0.1:0"})
        self.broker = Broker(config)
        self.probe = LoopProbe()
        self.handled_s = 0.0
        handle = self.broker.kafka_handler.handle_frame

        async def timed(frame: bytearray, peer: str) -> tuple[bytes | None, bool]:
            started = time.perf_counter()
            try:
                return await handle(frame, peer)
            finally:
                self.handled_s = time.perf_counter() - started

        self.broker.kafka_handler.handle_frame = timed  # type: ignore[method-assign]
        self.run(self.broker.start())
        self.probe_task = asyncio.run_coroutine_threadsafe(self.probe.run(), self.loop)

    def run(self, coroutine: Any) -> Any:
        return asyncio.run_coroutine_threadsafe(coroutine, self.loop).result(600)

    def call(self, fn: Callable[[], Any]) -> Any:
        async def wrapped() -> Any:
            return fn()

        return self.run(wrapped())

    def close(self) -> None:
        self.probe_task.cancel()
        self.run(self.broker.stop())
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(10)
        self.loop.close()


def create_topics_frame(topics: list[CreatableTopic]) -> bytes:
    request = CreateTopicsRequest(topics=topics, timeout_ms=10_000)
    return encode_request(request, REQUEST_VERSIONS[request.API_KEY], 1, "bench")


def topic(name: str, configs: list[CreatableTopicConfig]) -> CreatableTopic:
    return CreatableTopic(
        name=name, num_partitions=1, replication_factor=1, assignments=[], configs=configs
    )


def cases(frame_bytes: int) -> dict[str, bytes]:
    """Case name -> one CreateTopics frame of about frame_bytes."""
    dup = CreatableTopicConfig(name="segment.bytes", value="1")
    entry = len(create_topics_frame([topic("dups", [dup])])) - len(
        create_topics_frame([topic("dups", [])])
    )
    dups = [dup] * (frame_bytes // entry)
    # At the cap: long keys, every one given twice (the linear duplicate check's full work).
    key_bytes = frame_bytes // MAX_CONFIGS_PER_TOPIC - 8
    keys = [f"{i:04d}" + "k" * (key_bytes - 4) for i in range(MAX_CONFIGS_PER_TOPIC // 2)]
    twice = [CreatableTopicConfig(name=k, value="1") for k in keys] * 2
    # Many small topics: over the topics cap.
    per_topic = len(create_topics_frame([topic("t000000", [])])) - len(create_topics_frame([]))
    many = [topic(f"t{i:06d}", []) for i in range(frame_bytes // per_topic)]
    return {
        "one topic, duplicate configs": create_topics_frame([topic("dups", dups)]),
        "one topic, 1000 long configs, each twice": create_topics_frame([topic("twice", twice)]),
        "many topics": create_topics_frame(many),
    }


def send(port: int, frame: bytes) -> tuple[float, CreateTopicsResponse]:
    """Send one frame on a fresh connection; the round trip and the decoded answer."""
    with socket.create_connection(("127.0.0.1", port), timeout=600) as sock:
        started = time.perf_counter()
        sock.sendall(frame)
        head = recv_exactly(sock, 4)
        payload = recv_exactly(sock, struct.unpack(">i", head)[0])
        elapsed = time.perf_counter() - started
    _, body = decode_response(payload, CreateTopicsResponse)
    return elapsed, body


def recv_exactly(sock: socket.socket, size: int) -> bytes:
    chunks = []
    while size:
        chunk = sock.recv(min(size, 1 << 20))
        if not chunk:
            raise ConnectionError("the broker closed the connection")
        chunks.append(chunk)
        size -= len(chunk)
    return b"".join(chunks)


def summarize(response: CreateTopicsResponse) -> tuple[str, str]:
    """The answer as 'N x CODE' and the first message."""
    codes: dict[str, int] = {}
    for result in response.topics:
        name = ErrorCode.from_wire(result.error_code).name
        codes[name] = codes.get(name, 0) + 1
    answer = ", ".join(f"{n} x {code}" for code, n in codes.items())
    message = (response.topics[0].error_message or "") if response.topics else ""
    return answer, message


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--frame-bytes", type=int, default=1 << 20, help="size of each frame")
    parser.add_argument("--repeat", type=int, default=3, help="frames sent per case (best kept)")
    args = parser.parse_args()

    rows = []
    with tempfile.TemporaryDirectory(prefix="squall-bench-") as tmp:
        bench = BenchBroker(Path(tmp) / "logs")
        try:
            for case, frame in cases(args.frame_bytes).items():
                decode_s = min(timed_decode(frame) for _ in range(args.repeat))
                best: dict[str, Any] | None = None
                for _ in range(args.repeat):
                    bench.call(bench.probe.reset)
                    round_trip_s, response = send(bench.broker.port, frame)
                    time.sleep(0.05)  # let the probe wake once more after the answer
                    row = {
                        "case": case,
                        "frame_bytes": len(frame),
                        "round_trip_s": round(round_trip_s, 4),
                        "handled_s": round(bench.call(lambda: bench.handled_s), 4),
                        "decode_s": round(decode_s, 4),
                        "longest_loop_stall_s": round(bench.call(lambda: bench.probe.longest_s), 4),
                    }
                    row["answer"], row["message"] = summarize(response)
                    if best is None or row["longest_loop_stall_s"] < best["longest_loop_stall_s"]:
                        best = row
                assert best is not None
                print(json.dumps(best), flush=True)
                rows.append(best)
        finally:
            bench.close()
    print(f"\n{'case':<42} {'frame':>9} {'stall s':>8} {'handled s':>10} {'decode s':>9}  answer")
    for r in rows:
        print(
            f"{r['case']:<42} {r['frame_bytes']:>9,} {r['longest_loop_stall_s']:>8.3f} "
            f"{r['handled_s']:>10.3f} {r['decode_s']:>9.3f}  {r['answer']}"
        )
        print(f"{'':<42} {'':>9} {'':>8} {'':>10} {'':>9}  {r['message'][:90]}")
    print(f"\nbefore the fix, the first case stalled the loop for {BEFORE_S} s")
    return 0


def timed_decode(frame: bytes) -> float:
    """Decoding the frame alone (part of handled_s), in this thread."""
    started = time.perf_counter()
    decode_request(memoryview(frame)[4:])
    return time.perf_counter() - started


if __name__ == "__main__":
    raise SystemExit(main())
