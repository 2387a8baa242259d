"""The broker's and controller's event log: one JSON line per election, ISR change,
truncation, controller election, or log changed by its recovery at startup.

squall's runner fetches these files from the nodes after a run and merges the events into
the history by time (docs/history.md: SUT events). ``wall_time_ns`` is the node's wall clock, so
events from different nodes can be placed on one time line.
"""

from __future__ import annotations

import json
import os
import threading
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any


class EventLog:
    """Appends events as JSON lines; each line reaches the OS before ``write`` returns."""

    def __init__(self, path: Path | None, *, broker_id: int) -> None:
        self.path = path
        self.broker_id = broker_id
        self._lock = threading.Lock()
        self._fd: int | None = None
        if path is not None:
            path.parent.mkdir(parents=True, exist_ok=True)
            self._fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)

    def write(self, event_type: str, **fields: Any) -> dict[str, Any]:
        """Record one event; returns it as written."""
        event: dict[str, Any] = {
            "wall_time_ns": time.time_ns(),
            "type": event_type,
            "broker": self.broker_id,
            **fields,
        }
        line = (json.dumps(event, separators=(",", ":")) + "\n").encode()
        with self._lock:
            if self._fd is not None:
                os.write(self._fd, line)
        return event

    def leader_election(
        self,
        *,
        key: str,
        leader: int,
        leader_epoch: int,
        isr: Sequence[int],
        previous_leader: int,
        unclean: bool,
        controller_epoch: int,
        reason: str,
        elr: Sequence[int] = (),
        previous_isr: Sequence[int] = (),
        previous_elr: Sequence[int] = (),
        zk_version: int | None = None,
        previous_zk_version: int | None = None,
    ) -> dict[str, Any]:
        """A controller's election (leader -1 records a partition going offline), with the
        ISR and ELR it elected from as ZooKeeper held them (`previous_isr`, `previous_elr`),
        the version of that partition state (`previous_zk_version`) and of the one it wrote
        (`zk_version`), with its ISR and eligible leader replicas (`isr`, `elr`)."""
        versions = {
            name: value
            for name, value in (
                ("zk_version", zk_version),
                ("previous_zk_version", previous_zk_version),
            )
            if value is not None
        }
        return self.write(
            "leader-election",
            key=key,
            leader=leader,
            leader_epoch=leader_epoch,
            isr=list(isr),
            elr=list(elr),
            previous_leader=previous_leader,
            previous_isr=list(previous_isr),
            previous_elr=list(previous_elr),
            unclean=unclean,
            controller_epoch=controller_epoch,
            reason=reason,
            **versions,
        )

    def isr_change(
        self,
        *,
        key: str,
        isr: Sequence[int],
        leader: int,
        leader_epoch: int,
        reason: str,
        elr: Sequence[int] = (),
        previous_isr: Sequence[int] | None = None,
        high_watermark: int | None = None,
        log_end_offsets: Mapping[int, int] | None = None,
        zk_version: int | None = None,
    ) -> dict[str, Any]:
        """An ISR shrink or expand, by a leader or by the controller, with the eligible leader
        replicas that go with it (`elr`) and the version of the partition state it wrote
        (`zk_version`). A leader adds what it knew when it decided:
        its ISR then, its high watermark and each replica's log end offset as it knew it."""
        known: dict[str, Any] = {}
        if zk_version is not None:
            known["zk_version"] = zk_version
        if previous_isr is not None:
            known["previous_isr"] = list(previous_isr)
        if high_watermark is not None:
            known["high_watermark"] = high_watermark
        if log_end_offsets is not None:
            known["log_end_offsets"] = {str(b): end for b, end in log_end_offsets.items()}
        return self.write(
            "isr-change",
            key=key,
            isr=list(isr),
            elr=list(elr),
            leader=leader,
            leader_epoch=leader_epoch,
            reason=reason,
            **known,
        )

    def truncation(
        self,
        *,
        key: str,
        from_offset: int,
        to_offset: int,
        leader_epoch: int,
        reason: str,
        requested_offset: int | None = None,
    ) -> dict[str, Any]:
        """A replica dropping the end of its log (``reason``: the rule that chose the point;
        ``requested_offset``, when the log was cut below it: the point the rule chose, inside
        a batch that went whole)."""
        extra = (
            {} if requested_offset in (None, to_offset) else {"requested_offset": requested_offset}
        )
        return self.write(
            "truncation",
            key=key,
            from_offset=from_offset,
            to_offset=to_offset,
            leader_epoch=leader_epoch,
            reason=reason,
            **extra,
        )

    def log_recovery(
        self,
        *,
        key: str,
        log_end_offset: int,
        clean_shutdown: bool,
        truncated_bytes: int,
        deleted_segments: Sequence[int],
        rebuilt_indexes: Sequence[int],
        problem: str | None,
    ) -> dict[str, Any]:
        """Loading a partition's log at startup changed it: segments cut at a bad record or
        deleted after the cut, indexes rebuilt (``problem``: the first reason)."""
        return self.write(
            "log-recovery",
            key=key,
            log_end_offset=log_end_offset,
            clean_shutdown=clean_shutdown,
            truncated_bytes=truncated_bytes,
            deleted_segments=list(deleted_segments),
            rebuilt_indexes=list(rebuilt_indexes),
            problem=problem,
        )

    def close(self) -> None:
        with self._lock:
            if self._fd is not None:
                os.close(self._fd)
                self._fd = None
