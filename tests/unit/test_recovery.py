"""Recovery: a damaged partition directory comes back as its longest valid prefix."""

from __future__ import annotations

import logging
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, assume, event, given, settings
from hypothesis import strategies as st

from system_under_test.log import Log, LogConfig
from system_under_test.log.record import Record, decode_records, encode_records, iter_batches

CONFIG = LogConfig(segment_bytes=400, index_interval_bytes=120)


def value(offset: int) -> bytes:
    """32 bytes, so that a batch of one record (without key) takes 100 bytes."""
    return b"%04d" % offset + b"r" * 28


def write_log(directory: Path, count: int, config: LogConfig = CONFIG) -> list[Record]:
    """A closed log of count records, each a 100-byte batch of its own, appended two at a
    time; returns what was written."""
    log = Log.open(directory, config, recovery_point=0, clean_shutdown=True)
    for start in range(0, count, 2):
        offsets = range(start, min(start + 2, count))
        log.append(
            bytearray(
                b"".join(encode_records([(None, value(o), 10 * o)], base_offset=o) for o in offsets)
            )
        )
    log.close()
    return [Record(offset, 10 * offset, None, value(offset)) for offset in range(count)]


def reopen(
    directory: Path, *, recovery_point: int = 0, clean: bool = False, config: LogConfig = CONFIG
) -> Log:
    return Log.open(directory, config, recovery_point=recovery_point, clean_shutdown=clean)


def read_everything(log: Log) -> list[Record]:
    out: list[Record] = []
    offset = log.log_start_offset
    while offset < log.log_end_offset:
        records = decode_records(log.read(offset, 1000).records)  # checks every CRC
        assert records, f"no record at {offset} below the log end {log.log_end_offset}"
        out.extend(records)
        offset = records[-1].offset + 1
    return out


def seg(base: int, suffix: str = ".log") -> str:
    return f"{base:020d}{suffix}"


# With 400-byte segments and 200-byte appends: segments at 0, 4, 8, ... of 4 records each.


def test_intact_log_recovers_unchanged(tmp_path: Path) -> None:
    original = write_log(tmp_path, 10)
    log = reopen(tmp_path)
    assert read_everything(log) == original
    assert not log.recovery_report.truncated
    assert [r.base_offset for r in log.recovery_report.recovered] == [0, 4, 8]
    assert log.recovery_point == 10


def test_partial_record_at_the_end_is_cut(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    original = write_log(tmp_path, 10)
    path = tmp_path / seg(8)
    path.write_bytes(path.read_bytes()[:-30])  # a crash in the middle of writing record 9
    with caplog.at_level(logging.WARNING):
        log = reopen(tmp_path)
    assert log.log_end_offset == 9
    assert read_everything(log) == original[:9]
    assert "truncated segment 8 at byte 100" in caplog.text
    (recovery,) = [r for r in log.recovery_report.recovered if r.truncated_bytes]
    assert (recovery.base_offset, recovery.valid_bytes, recovery.truncated_bytes) == (8, 100, 70)
    assert log.append(bytearray(encode_records([(None, b"new", 1)]))).first_offset == 9


def test_corrupt_middle_segment_drops_later_segments(tmp_path: Path) -> None:
    original = write_log(tmp_path, 12)
    path = tmp_path / seg(4)
    data = bytearray(path.read_bytes())
    data[250] ^= 0x01  # inside record 6's value
    path.write_bytes(bytes(data))
    log = reopen(tmp_path)
    assert log.log_end_offset == 6
    assert read_everything(log) == original[:6]
    assert log.recovery_report.deleted_segments == [8]
    assert not (tmp_path / seg(8)).exists()
    assert not (tmp_path / seg(8, ".index")).exists()


def test_zero_length_log_file_ends_the_log_there(tmp_path: Path) -> None:
    original = write_log(tmp_path, 12)
    (tmp_path / seg(4)).write_bytes(b"")
    log = reopen(tmp_path)
    assert log.log_end_offset == 4
    assert read_everything(log) == original[:4]
    assert [s.base_offset for s in log.segments] == [0, 4]


def test_zero_gap_from_preallocation_is_cut(tmp_path: Path) -> None:
    original = write_log(tmp_path, 10)
    with (tmp_path / seg(8)).open("ab") as f:
        f.write(b"\x00" * 4096)
    log = reopen(tmp_path)
    assert log.log_end_offset == 10
    assert read_everything(log) == original
    assert log.segments[-1].size == 200


def test_first_record_must_carry_the_base_offset(tmp_path: Path) -> None:
    write_log(tmp_path, 6)
    path = tmp_path / seg(4)
    data = bytearray(path.read_bytes())
    data[7] = 9  # record 4 now claims offset 9
    path.write_bytes(bytes(data))
    log = reopen(tmp_path)
    assert log.log_end_offset == 4
    assert log.segments[-1].size == 0


def test_garbage_index_is_rebuilt_even_after_a_clean_shutdown(tmp_path: Path) -> None:
    original = write_log(tmp_path, 12)
    (tmp_path / seg(4, ".index")).write_bytes(b"\x13\x37" * 13)
    (tmp_path / seg(0, ".timeindex")).write_bytes(b"\xff" * 24)
    log = reopen(tmp_path, recovery_point=12, clean=True)
    assert sorted(log.recovery_report.rebuilt_indexes) == [0, 4]
    assert read_everything(log) == original
    assert log.offset_for_timestamp(55) == 6
    assert log.segments[1].offset_index.entries > 0


def test_only_segments_from_the_recovery_point_are_revalidated(tmp_path: Path) -> None:
    write_log(tmp_path, 12)
    log = reopen(tmp_path, recovery_point=5)
    assert [r.base_offset for r in log.recovery_report.recovered] == [4, 8]
    log.close()
    log = reopen(tmp_path, recovery_point=12, clean=True)
    assert log.recovery_report.recovered == []


def test_stray_files_and_orphan_indexes_are_removed(tmp_path: Path) -> None:
    original = write_log(tmp_path, 6)
    strays = [
        seg(8, ".log.deleted"),
        seg(4, ".log.cleaned"),
        "leader-epoch-checkpoint.tmp",
        seg(4, ".index.swap"),
    ]
    for name in strays:
        (tmp_path / name).write_bytes(b"junk")
    (tmp_path / seg(40, ".index")).write_bytes(b"")
    (tmp_path / seg(40, ".timeindex")).write_bytes(b"")
    (tmp_path / "leader-epoch-checkpoint").write_text("0\n0\n")
    log = reopen(tmp_path, recovery_point=6, clean=True)
    assert sorted(log.recovery_report.removed_files) == sorted(
        [*strays, seg(40, ".index"), seg(40, ".timeindex")]
    )
    assert (tmp_path / "leader-epoch-checkpoint").exists()
    assert read_everything(log) == original


def test_empty_directory_gives_an_empty_log(tmp_path: Path) -> None:
    log = reopen(tmp_path / "new-0")
    assert (log.log_start_offset, log.log_end_offset) == (0, 0)
    assert (tmp_path / "new-0" / seg(0)).exists()


# -- the recovery property ---------------------------------------------------------------------

record_strategy = st.tuples(
    st.one_of(st.none(), st.binary(max_size=12)),
    st.one_of(st.none(), st.binary(max_size=60)),
    st.integers(0, 2**40),
)
batches_strategy = st.lists(
    st.lists(record_strategy, min_size=1, max_size=4), min_size=1, max_size=12
)


@settings(deadline=None, max_examples=250, suppress_health_check=[HealthCheck.too_slow])
@given(
    batches=batches_strategy,
    interval=st.sampled_from([0, 40, 150, 4096]),
    damage=st.sampled_from(["truncate", "flip"]),
    data=st.data(),
)
def test_recovery_yields_exactly_a_prefix_of_the_written_records(
    batches: list[list[tuple[bytes | None, bytes | None, int]]],
    interval: int,
    damage: str,
    data: st.DataObject,
) -> None:
    config = LogConfig(segment_bytes=256, index_interval_bytes=interval, segment_index_bytes=64)
    with tempfile.TemporaryDirectory() as tmp:
        directory = Path(tmp) / "topic-0"
        log = Log.open(directory, config, recovery_point=0, clean_shutdown=True)
        for items in batches:
            log.append(bytearray(encode_records(items)))
        original = read_everything(log)
        log.close()
        assert len(original) == sum(len(b) for b in batches)

        # Damage a log file three times in five, else an index file.
        kind = [".log", ".log", ".log", ".index", ".timeindex"][data.draw(st.integers(0, 4))]
        victim = data.draw(st.sampled_from(sorted(directory.glob(f"*{kind}"))), label="file")
        before = victim.read_bytes()
        damaged = bytearray(before)
        if damage == "truncate":
            cut = data.draw(st.integers(0, len(before)), label="truncate at")
            del damaged[cut:]
        else:
            assume(before)
            cut = data.draw(st.integers(0, len(before) - 1), label="flip at")
            damaged[cut] ^= data.draw(st.integers(1, 255), label="xor")
        victim.write_bytes(bytes(damaged))
        expected_end = len(original)
        is_log = victim.suffix == ".log"
        hit = [
            p
            for p in (iter_batches(before) if is_log else ())
            if p.position <= cut < p.position + p.size
        ]
        # A batch's leader epoch (bytes 12-15) is outside its CRC, as in Kafka: not damage
        # recovery can see.
        unseen = damage == "flip" and hit and 12 <= cut - hit[0].position < 16
        if is_log and cut < len(before) and not unseen:
            # Batches wholly before the damage survive; nothing from the damaged batch on.
            whole = sum(
                p.last_offset - p.base_offset + 1
                for p in iter_batches(before)
                if p.position + p.size <= cut
            )
            expected_end = int(victim.stem) + whole

        event(
            f"{damage} {victim.suffix}: {'lost records' if expected_end < len(original) else 'no loss'}"
        )
        recovered = Log.open(directory, config, recovery_point=0, clean_shutdown=False)
        records = read_everything(recovered)
        assert records == original[: len(records)]
        assert recovered.log_end_offset == len(records) == expected_end
        info = recovered.append(bytearray(encode_records([(b"after", b"crash", 7)])))
        assert info.first_offset == expected_end
        assert read_everything(recovered)[-1] == Record(expected_end, 7, b"after", b"crash")
        recovered.close()
