"""The console tools as a user runs them: separate processes against a real broker."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from squall.cluster.broker_process import BrokerProcess
from squall.cluster.zookeeper_server import free_port
from tests.support import run_squall

pytestmark = pytest.mark.integration


def squall(
    *args: str, stdin: str | None = None, timeout: float = 120
) -> subprocess.CompletedProcess[str]:
    return run_squall(*args, stdin=stdin, timeout=timeout)


@pytest.fixture
def broker(tmp_path: Path) -> Iterator[BrokerProcess]:
    with BrokerProcess(tmp_path / "broker") as process:
        yield process


def json_lines(text: str) -> list[dict[str, object]]:
    return [json.loads(line) for line in text.splitlines() if line.strip()]


def test_round_trip_of_10000_records(broker: BrokerProcess) -> None:
    created = squall(
        "topic", "create", "--bootstrap", broker.bootstrap, "--topic", "rt", "--partitions", "2"
    )
    assert created.returncode == 0, created.stderr
    assert json_lines(created.stdout) == [
        {"created": "rt", "partitions": 2, "replication_factor": 1}
    ]

    values = [f"value-{i}" for i in range(10_000)]
    produced = squall(
        "produce",
        "--bootstrap",
        broker.bootstrap,
        "--topic",
        "rt",
        "--partition",
        "1",
        "--acks",
        "1",
        "--mode",
        "async",
        stdin="\n".join(values) + "\n",
    )
    assert produced.returncode == 0, produced.stderr
    results = json_lines(produced.stdout)
    assert results == [{"partition": 1, "offset": i} for i in range(10_000)]

    consumed = squall(
        "consume",
        "--bootstrap",
        broker.bootstrap,
        "--topic",
        "rt",
        "--partition",
        "1",
        "--from-offset",
        "0",
        "--max-records",
        "10000",
        "--timeout-ms",
        "5000",
    )
    assert consumed.returncode == 0, consumed.stderr
    assert json_lines(consumed.stdout) == [{"offset": i, "value": v} for i, v in enumerate(values)]

    middle = squall(
        "consume",
        "--bootstrap",
        broker.bootstrap,
        "--topic",
        "rt",
        "--partition",
        "1",
        "--from-offset",
        "9998",
        "--timeout-ms",
        "500",
    )
    assert json_lines(middle.stdout) == [
        {"offset": 9998, "value": values[9998]},
        {"offset": 9999, "value": values[9999]},
    ]


def test_sync_produce_with_keys_and_describe(broker: BrokerProcess) -> None:
    assert (
        squall(
            "topic", "create", "--bootstrap", broker.bootstrap, "--topic", "k", "--partitions", "3"
        ).returncode
        == 0
    )
    produced = squall(
        "produce",
        "--bootstrap",
        broker.bootstrap,
        "--topic",
        "k",
        "--acks",
        "-1",
        "--key-separator",
        ":",
        stdin="a:1\nb:2\nno-separator\na:3\n",
    )
    assert produced.returncode == 1  # one line had no separator
    lines = json_lines(produced.stdout)
    assert len(lines) == 4
    assert "error" in lines[2]
    assert lines[0]["partition"] == lines[3]["partition"]  # same key, same partition

    described = squall("topic", "describe", "--bootstrap", broker.bootstrap, "--json")
    assert described.returncode == 0, described.stderr
    partitions = json_lines(described.stdout)
    assert sorted(p["partition"] for p in partitions if p["topic"] == "k") == [0, 1, 2]
    assert all(p["leader"] == 0 and p["isr"] == [0] for p in partitions)


def test_perf_produce_prints_rate_and_percentiles(broker: BrokerProcess) -> None:
    assert (
        squall("topic", "create", "--bootstrap", broker.bootstrap, "--topic", "p").returncode == 0
    )
    out = squall(
        "perf",
        "produce",
        "--bootstrap",
        broker.bootstrap,
        "--topic",
        "p",
        "--records",
        "3000",
        "--record-size",
        "100",
        "--acks",
        "1",
        "--no-progress",
    )
    assert out.returncode == 0, out.stderr
    result = json_lines(out.stdout)[-1]
    assert result["acknowledged"] == 3000
    assert isinstance(result["records_per_sec"], float) and result["records_per_sec"] > 0
    latency = result["latency_ms"]
    assert isinstance(latency, dict)
    assert 0 < latency["p50"] <= latency["p99"] <= latency["p999"]


def test_clear_errors_and_exit_codes(broker: BrokerProcess) -> None:
    nobody = f"127.0.0.1:{free_port()}"
    unreachable = squall("topic", "describe", "--bootstrap", nobody)
    assert unreachable.returncode == 3
    assert nobody in unreachable.stderr

    bad_acks = squall(
        "produce", "--bootstrap", broker.bootstrap, "--topic", "x", "--acks", "2", stdin="v\n"
    )
    assert bad_acks.returncode == 2
    assert "--acks" in bad_acks.stderr

    exists = squall("topic", "create", "--bootstrap", broker.bootstrap, "--topic", "dup")
    assert exists.returncode == 0
    again = squall("topic", "create", "--bootstrap", broker.bootstrap, "--topic", "dup")
    assert again.returncode == 2
    assert "dup" in again.stderr and "exist" in again.stderr.lower()

    bad_name = squall("topic", "create", "--bootstrap", broker.bootstrap, "--topic", "no/slash")
    assert bad_name.returncode == 2

    bad_config = squall(
        "topic",
        "create",
        "--bootstrap",
        broker.bootstrap,
        "--topic",
        "c",
        "--config",
        "segment.bytes=lots",
    )
    assert bad_config.returncode == 2
    assert "segment.bytes" in bad_config.stderr

    unknown_key = squall("broker", "--standalone", "--set", "log.dirz=/tmp/x")
    assert unknown_key.returncode == 2
    assert "log.dirz" in unknown_key.stderr
