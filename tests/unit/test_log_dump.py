"""`python -m system_under_test dump-log`: a log written by the SUT's own Log, read back."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from system_under_test.__main__ import main as sut_main
from system_under_test.log import (
    LEADER_EPOCH_CHECKPOINT_FILE,
    REPLICATION_OFFSET_CHECKPOINT_FILE,
    LeaderEpochCheckpointFile,
    Log,
    LogConfig,
    OffsetCheckpointFile,
)
from system_under_test.log.record import encode_records

CONFIG = LogConfig(segment_bytes=400, index_interval_bytes=120)


def value(offset: int) -> bytes:
    """31 bytes, so that a batch of one record (with a 1-byte key) takes 100 bytes: 4 per
    400-byte segment."""
    return b"%04d" % offset + b" " * 27


def write_log(log_dir: Path, count: int, *, topic: str = "t", partition: int = 0) -> Path:
    """`count` records, each a batch of its own, two per append, by the SUT's Log; a closed
    partition directory."""
    directory = log_dir / f"{topic}-{partition}"
    log = Log.open(directory, CONFIG, recovery_point=0, clean_shutdown=True)
    for start in range(0, count, 2):
        offsets = range(start, min(start + 2, count))
        log.append(
            bytearray(
                b"".join(
                    encode_records([(b"k", value(o), 1000 + o)], base_offset=o) for o in offsets
                )
            ),
        )
    log.close()
    return directory


def dump(capsys: pytest.CaptureFixture[str], *args: str) -> list[dict[str, Any]]:
    assert sut_main(["dump-log", *args, "--format", "jsonl"]) == 0
    return [json.loads(line) for line in capsys.readouterr().out.splitlines()]


def of_type(lines: list[dict[str, Any]], kind: str) -> list[dict[str, Any]]:
    return [line for line in lines if line["type"] == kind]


def test_dump_lists_every_record_with_its_segment_epoch_and_checkpoints(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    directory = write_log(tmp_path, 10)
    write_log(tmp_path, 3, topic="other")
    LeaderEpochCheckpointFile(directory / LEADER_EPOCH_CHECKPOINT_FILE).write([(0, 0), (3, 6)])
    OffsetCheckpointFile(tmp_path / REPLICATION_OFFSET_CHECKPOINT_FILE).write({("t", 0): 8})

    lines = dump(capsys, "--log-dir", str(tmp_path), "--topic", "t")

    (header,) = of_type(lines, "partition")
    assert header["high_watermark"] == 8
    assert header["leader_epochs"] == [[0, 0], [3, 6]]
    assert header["segments"] == [0, 4, 8]
    records = of_type(lines, "record")
    assert [r["offset"] for r in records] == list(range(10))
    assert [r["value"] for r in records] == [value(o).decode() for o in range(10)]
    assert {r["key"] for r in records} == {"k"}
    assert [r["segment"] for r in records] == [0] * 4 + [4] * 4 + [8] * 2
    assert [r["leader_epoch"] for r in records] == [0] * 6 + [3] * 4
    assert all(r["crc_valid"] for r in records)
    assert [r["timestamp"] for r in records] == [1000 + o for o in range(10)]
    (end,) = of_type(lines, "end")
    assert end["log_start_offset"] == 0
    assert end["log_end_offset"] == 10
    assert end["records"] == 10
    assert end["recovery_stop"] is None
    assert {line["topic"] for line in lines} == {"t"}


def test_a_flipped_bit_is_shown_and_the_cut_is_where_recovery_cuts(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    directory = write_log(tmp_path, 10)
    segment = directory / f"{4:020d}.log"
    data = bytearray(segment.read_bytes())
    data[100 + 98] ^= 0x01  # the last value byte of offset 5, the second batch of segment 4
    segment.write_bytes(bytes(data))

    lines = dump(capsys, "--log-dir", str(tmp_path), "--partition", "0")

    records = of_type(lines, "record")
    assert [r["offset"] for r in records] == list(range(10)), "a bad CRC does not stop the dump"
    assert [r["offset"] for r in records if not r["crc_valid"]] == [5]
    assert "crc" in records[5]["problem"].lower()
    (end,) = of_type(lines, "end")
    assert end["invalid_records"] == 1
    stop = end["recovery_stop"]
    assert (stop["segment"], stop["position"], stop["offset"]) == (4, 100, 5)
    assert stop["records_cut"] == 5
    recovered = Log.open(directory, CONFIG, recovery_point=0, clean_shutdown=False)
    try:
        assert recovered.log_end_offset == stop["offset"]
    finally:
        recovered.close()


def test_a_torn_tail_is_unreadable_and_cut(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    directory = write_log(tmp_path, 7)
    segment = directory / f"{4:020d}.log"
    segment.write_bytes(segment.read_bytes()[:-30])

    lines = dump(capsys, "--log-dir", str(tmp_path))

    assert [r["offset"] for r in of_type(lines, "record")] == list(range(6))
    (unreadable,) = of_type(lines, "unreadable")
    assert (unreadable["segment"], unreadable["position"]) == (4, 200)
    (end,) = of_type(lines, "end")
    assert end["log_end_offset"] == 6
    assert end["recovery_stop"]["offset"] == 6


def test_text_format_and_help(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    write_log(tmp_path, 2)
    assert sut_main(["dump-log", "--log-dir", str(tmp_path)]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[2].startswith("batch topic: ") and "base_offset: 0 " in out[2]
    assert out[3].startswith("record topic: ") and "offset: 0 " in out[3]
    with pytest.raises(SystemExit) as exited:
        sut_main(["dump-log", "--help"])
    assert exited.value.code == 0
    assert "--log-dir" in capsys.readouterr().out


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--log-dir", "{missing}"], "does not exist"),
        (["--log-dir", "{file}"], "is not a directory"),
        (["--log-dir", "{dir}", "--topic", "nope"], "no partition directory"),
    ],
)
def test_bad_input_is_a_clear_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], args: list[str], message: str
) -> None:
    write_log(tmp_path / "logs", 2)
    (tmp_path / "file").write_text("")
    paths = {
        "missing": str(tmp_path / "missing"),
        "file": str(tmp_path / "file"),
        "dir": str(tmp_path / "logs"),
    }
    assert sut_main(["dump-log", *(a.format(**paths) for a in args)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and message in err
