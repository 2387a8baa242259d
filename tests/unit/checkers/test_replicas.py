"""The `replicas` checker (`replica-divergence`) on hand-written replica reads, written as
`squall run` writes them (`squall.replica_reads.replica_read_values`)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from checkers import CheckConfig, check_history
from squall.replica_reads import PartitionEnd, ReplicaLog, replica_read_values
from tests.unit.checkers.history_builder import HistoryBuilder

ISR = (1, 2, 3)


def records(first: int, end: int, *, changed: dict[int, int] | None = None) -> list[Any]:
    """Offsets first..end-1 holding the value 100 + offset (or `changed`'s)."""
    changed = changed or {}
    return [(o, changed.get(o, 100 + o)) for o in range(first, end)]


def read(
    b: HistoryBuilder,
    key: str,
    replicas: dict[int, list[Any] | None],
    *,
    hw: int | None,
    isr: Sequence[int] = ISR,
    leader: int = 1,
    invalid: dict[int, list[int]] | None = None,
    chunk: int | None = None,
) -> None:
    """One key's replica reads: per broker its records (None: the read failed)."""
    end = PartitionEnd(leader, 3, ISR, tuple(isr), hw)
    topic, partition = key.rsplit("-", 1)
    for broker, held in replicas.items():
        replica = None
        if held is not None:
            replica = ReplicaLog(topic, int(partition), records=list(held))
            replica.invalid_offsets = (invalid or {}).get(broker, [])
            replica.log_start_offset = 0
            replica.log_end_offset = held[-1][0] + 1 if held else 0
        values = list(replica_read_values(key, broker, end, replica, error="ssh: lost"))
        if chunk is not None:  # cut as a long log is, in several lines
            assert replica is not None
            values = []
            for i in range(0, len(replica.records), chunk):
                part = ReplicaLog(topic, int(partition), records=replica.records[i : i + chunk])
                values += list(replica_read_values(key, broker, end, part))
        for value in values:
            b.tick()
            b.writer.event("replica-read", value, process="sut", final=True, node=f"n{broker}")


def build(b: HistoryBuilder) -> None:
    p = b.process()
    b.send1(p, "agree-0", 100, 0)
    b.poll(b.process(), {"agree-0": [(0, 100)]})
    full = records(0, 10)
    read(b, "agree-0", {1: full, 2: full, 3: full}, hw=10)
    # Followers behind the leader only above the high watermark.
    read(b, "lag-0", {1: records(0, 10), 2: records(0, 9), 3: records(0, 8)}, hw=8)
    # A replica outside the ISR, truncated (and not caught up).
    read(b, "truncated-0", {1: full, 2: full, 3: records(0, 5)}, hw=10, isr=(1, 2))
    # Another value at offset 5 in broker 2 (in the ISR).
    read(b, "differs-0", {1: full, 2: records(0, 10, changed={5: 999}), 3: full}, hw=10)
    # An ISR member without offsets 7..9 below the high watermark.
    read(b, "missing-0", {1: full, 2: full, 3: records(0, 7)}, hw=10)
    # A record whose CRC is wrong on broker 2.
    read(b, "corrupt-0", {1: full, 2: full, 3: full}, hw=10, invalid={2: [3]})
    # A replica outside the ISR holding another value below the high watermark.
    read(b, "outside-0", {1: full, 2: full, 3: records(0, 4, changed={2: 7})}, hw=10, isr=(1, 2))
    # Differences at or above the high watermark are not judged.
    read(b, "above-0", {1: full, 2: records(0, 10, changed={8: 1}), 3: full}, hw=8)
    # A replica that could not be read; the others agree.
    read(b, "unread-0", {1: full, 2: full, 3: None}, hw=10)
    # No high watermark known: not judged.
    read(b, "nohw-0", {1: full, 2: records(0, 10, changed={1: 5})}, hw=None)
    # A long log in chunks, identical everywhere.
    long = records(0, 250)
    read(b, "chunks-0", {1: long, 2: long, 3: long}, hw=250, chunk=100)
    # The leader itself differs: both followers are reported against it.
    read(b, "leader-0", {1: records(0, 10, changed={0: 1}), 2: full, 3: full}, hw=10)
    placed(b)


def placed(b: HistoryBuilder) -> None:
    """Lost writes in the middle, at the tail and at the start of what the log held."""
    for key, sent, read_before, held in (
        ("hole-0", range(5), [0, 1, 3, 4], [0, 1, 3, 4]),
        ("tail-0", range(4), [0, 1, 3], [0, 1]),
        ("prefix-0", range(4), [1, 2, 3], [1, 2, 3]),
    ):
        p = b.process()
        for offset in sent:
            b.send1(p, key, 1000 + offset, offset, acks=-1)
        b.poll(b.process(), {key: [(o, 1000 + o) for o in read_before]})
        b.poll(b.process(), {key: [(o, 1000 + o) for o in held]}, final=True)
        log = [(o, 1000 + o) for o in held]
        read(b, key, {1: log, 2: log, 3: log}, hw=held[-1] + 1)


@pytest.fixture(scope="module")
def results(spark: Any, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    builder = HistoryBuilder(tmp_path_factory.mktemp("replicas"))
    build(builder)
    return check_history(builder.close(), config=CheckConfig(sample=100))


def cases(results: dict[str, Any]) -> dict[tuple[str, int], dict[str, Any]]:
    found = results["checkers"]["replicas"]["anomalies"].get("replica-divergence", [])
    return {(c["key"], c["broker"]): c for c in found}


def test_fires_on_real_disagreements_only(results: dict[str, Any]) -> None:
    assert sorted(cases(results)) == [
        ("corrupt-0", 2),
        ("differs-0", 2),
        ("leader-0", 2),
        ("leader-0", 3),
        ("missing-0", 3),
        ("outside-0", 3),
    ]
    assert results["checkers"]["replicas"]["counts"] == {"replica-divergence": 6}
    assert results["valid"] is False
    assert "replica-divergence" in results["anomaly_types"]


def test_a_case_says_what_differs(results: dict[str, Any]) -> None:
    found = cases(results)
    differs = found[("differs-0", 2)]
    assert (differs["differs"], differs["missing"], differs["corrupt"]) == (1, 0, 0)
    assert differs["offsets"] == [5, 5]
    assert differs["examples"] == [{"offset": 5, "reference": 105, "value": 999}]
    assert differs["in_isr"] is True and differs["leader"] == 1 and differs["high_watermark"] == 10
    assert differs["node"] == "n2"
    missing = found[("missing-0", 3)]
    assert (missing["differs"], missing["missing"]) == (0, 3)
    assert missing["offsets"] == [7, 9]
    assert missing["examples"][0] == {"offset": 7, "reference": 107}
    assert found[("corrupt-0", 2)]["corrupt"] == 1
    outside = found[("outside-0", 3)]
    assert outside["in_isr"] is False and outside["missing"] == 0 and outside["differs"] == 1


def test_details_and_notes(results: dict[str, Any]) -> None:
    section = results["checkers"]["replicas"]
    details = section["details"]
    assert details["keys"] == 15
    assert details["unreadable_replicas"] == [
        {"key": "unread-0", "broker": 3, "node": "n3", "error": "ssh: lost"}
    ]
    assert details["keys_without_high_watermark"] == ["nohw-0"]
    assert any("could not be read" in note for note in section["notes"])
    text = results["explanations"]["replica-divergence"]["cases"][0]["text"]
    assert text == (
        "key leader-0: broker 2 (in the ISR [1, 2, 3]), replica read on line 44, holds "
        "another value at 1 offset below the high watermark 10 (offset 0), against leader "
        "1's log"
    )


def test_no_replica_reads_no_judgement(spark: Any, tmp_path: Path) -> None:
    b = HistoryBuilder(tmp_path / "run")
    b.send1(b.process(), "k-0", 1, 0)
    b.poll(b.process(), {"k-0": [(0, 1)]})
    results = check_history(b.close(), config=CheckConfig(sample=5))
    section = results["checkers"]["replicas"]
    assert section["counts"] == {} and section["valid"] is True
    assert any("not judged" in note for note in section["notes"])


def test_each_lost_write_is_placed_in_its_log(results: dict[str, Any]) -> None:
    lost = results["checkers"]["delivery"]["anomalies"]["lost-write"]
    assert sorted((c["key"], c["offset"], c["placement"]) for c in lost) == [
        ("hole-0", 2, "middle"),
        ("prefix-0", 0, "prefix"),
        ("tail-0", 2, "tail"),
    ]
    texts = [c["text"] for c in results["explanations"]["lost-write"]["cases"]]
    assert any("a hole in the middle of the log" in text for text in texts)
