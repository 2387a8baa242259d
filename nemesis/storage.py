"""Storage faults: a broker's files damaged, its data directory rolled back, its power lost.

- ``corrupt-file``: bits flipped at random places of one file of a replica (a segment's
  ``log``, ``index`` or ``timeindex``, or a checkpoint), after a crash of its broker (or,
  with ``crash: false``, under the running broker: a disk that lies);
- ``truncate-file``: the tail of one file (by default the active segment) chopped after a
  crash of its broker;
- ``snapshot`` and ``rollback``: a copy of the data directory taken (the broker paused for
  the moment of the copy, so the copy is what a power cut would have left with every write
  kept), and later put back in place of the directory while the broker is down (a disk
  restored from a backup), the broker started again;
- ``power-loss``: the broker killed and what its filesystem had not synced dropped at that
  instant (a runtime with a lazy disk only).

Which file, which bytes and which bits are drawn from the Nemesis's seeded ``random.Random``
and recorded in the fault as applied (``damage``: per node the ``path``, its ``size`` and the
``flips`` as ``[offset, bit]``, or ``to_size``), so a replay damages exactly the same bytes.
Nothing on disk can be healed; a crashed broker is started again by ``start``, as after a
``kill``, and snapshots are removed by ``drop-snapshots`` (and by every heal).
"""

from __future__ import annotations

import random
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from nemesis.errors import ClusterError, FaultError, UnsupportedFaultError
from nemesis.protocols import Disks, FaultableCluster, StoredFile
from nemesis.targets import PARTITION_ROLES, parse_key, parse_target

FILE_KINDS = (
    "log",
    "index",
    "timeindex",
    "leader-epoch-checkpoint",
    "recovery-point-checkpoint",
    "high-watermark-checkpoint",
)
"""What a storage fault may damage: a segment's three files, the partition's leader-epoch
checkpoint, or the data directory's recovery-point and high-watermark checkpoints."""
PARTITION_KINDS = frozenset({"log", "index", "timeindex", "leader-epoch-checkpoint"})
"""Kinds of file that belong to one partition (the fault names or aims at its key)."""
TRUNCATABLE_KINDS = ("log", "index", "timeindex")
"""Files that grow by appends, whose tail a crash can lose (checkpoints are replaced whole)."""
PICKS = ("last", "first", "random")
"""Which of the partition's files of a kind: the active segment's, the oldest, any."""
DEFAULT_BITS = 8
MAX_BITS = 4096
SNAPSHOT_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")


@dataclass(frozen=True)
class Damage:
    """What a fault did to one node's file: its path (relative to the data directory), its
    size before, and the bits flipped or the size it was cut to."""

    path: str
    size: int
    flips: tuple[tuple[int, int], ...] = ()
    to_size: int | None = None

    def to_json(self) -> dict[str, Any]:
        doc: dict[str, Any] = {"path": self.path, "size": self.size}
        if self.to_size is None:
            doc["flips"] = [list(flip) for flip in self.flips]
        else:
            doc["to_size"] = self.to_size
        return doc

    @classmethod
    def from_json(cls, doc: object, where: str) -> Damage:
        if not isinstance(doc, Mapping):
            raise FaultError(f"{where}: expected {{path, size, flips or to_size}}, got {doc!r}")
        path, size = doc.get("path"), doc.get("size")
        if not isinstance(path, str) or not _is_relative(path):
            raise FaultError(f"{where}.path: a path inside the data directory, got {path!r}")
        if not isinstance(size, int) or not _count(size):
            raise FaultError(f"{where}.size: bytes >= 0, got {size!r}")
        to_size = doc.get("to_size")
        if to_size is not None:
            if not _count(to_size):
                raise FaultError(f"{where}.to_size: bytes >= 0, got {to_size!r}")
            return cls(path, size, (), to_size)
        flips = doc.get("flips")
        if not isinstance(flips, list):
            raise FaultError(f"{where}.flips: a list of [offset, bit], got {flips!r}")
        pairs: list[tuple[int, int]] = []
        for flip in flips:
            if (
                not isinstance(flip, list)
                or len(flip) != 2
                or not _count(flip[0])
                or not _count(flip[1])
                or flip[1] > 7
            ):
                raise FaultError(f"{where}.flips: [offset >= 0, bit 0-7], got {flip!r}")
            pairs.append((flip[0], flip[1]))
        return cls(path, size, tuple(pairs))


def _count(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def _is_relative(path: str) -> bool:
    parts = path.split("/")
    return bool(path) and not path.startswith("/") and all(p not in ("", ".", "..") for p in parts)


def damages(value: Mapping[str, Any], f: str) -> dict[str, Damage]:
    """The recorded damage of a fault's value, by node."""
    doc = value.get("damage")
    if doc is None:
        return {}
    if not isinstance(doc, Mapping):
        raise FaultError(f"{f}: damage must be {{node: {{path, size, ...}}}}, got {doc!r}")
    return {str(node): Damage.from_json(d, f"{f}: damage.{node}") for node, d in doc.items()}


def validate(f: str, value: Mapping[str, Any]) -> None:
    """FaultError naming what is wrong in a storage fault's value."""
    if f in ("corrupt-file", "truncate-file"):
        kinds = FILE_KINDS if f == "corrupt-file" else TRUNCATABLE_KINDS
        kind = value.get("file", "log")
        if kind not in kinds:
            raise FaultError(f"{f}: file must be one of {', '.join(kinds)}, got {kind!r}")
        pick = value.get("pick", "last")
        if pick not in PICKS:
            raise FaultError(f"{f}: pick must be one of {', '.join(PICKS)}, got {pick!r}")
        key = value.get("key")
        if key is not None:
            if not isinstance(key, str):
                raise FaultError(f"{f}: key must be TOPIC-PARTITION, got {key!r}")
            parse_key(key)
        if f == "corrupt-file":
            bits = value.get("bits", DEFAULT_BITS)
            if not _count(bits) or not 1 <= bits <= MAX_BITS:
                raise FaultError(f"corrupt-file: bits must be 1 to {MAX_BITS}, got {bits!r}")
            if not isinstance(value.get("crash", True), bool):
                raise FaultError(
                    f"corrupt-file: crash must be true or false, got {value['crash']!r}"
                )
        else:
            most = value.get("max_bytes")
            if most is not None and (not _count(most) or most < 1):
                raise FaultError(f"truncate-file: max_bytes must be >= 1, got {most!r}")
            if value.get("crash", True) is not True:
                raise FaultError("truncate-file always crashes the broker first (crash: true)")
        for node, damage in damages(value, f).items():
            if (damage.to_size is None) != (f == "corrupt-file"):
                raise FaultError(
                    f"{f}: damage.{node} must give {'flips' if f == 'corrupt-file' else 'to_size'}"
                )
    if f in ("snapshot", "rollback"):
        name = value.get("name")
        if name is not None and (not isinstance(name, str) or not SNAPSHOT_NAME.match(name)):
            raise FaultError(
                f"{f}: name must be 1 to 64 letters, digits, '_', '.' or '-', got {name!r}"
            )
    if f == "rollback":
        named = value.get("snapshots")
        if named is not None and (
            not isinstance(named, Mapping)
            or not all(isinstance(n, str) and SNAPSHOT_NAME.match(n) for n in named.values())
        ):
            raise FaultError(f"rollback: snapshots must be {{node: snapshot name}}, got {named!r}")


def require_disks(cluster: FaultableCluster) -> Disks:
    """The cluster's disks, or UnsupportedFaultError saying why there are none."""
    disks = cluster.disks
    if disks is None or not cluster.capabilities.disks:
        raise UnsupportedFaultError(
            "storage faults need the brokers' data directories, which this "
            f"{cluster.capabilities.runtime} cluster does not give the nemesis"
        )
    return disks


def require_lazy_disk(cluster: FaultableCluster) -> Disks:
    """The cluster's disks where they can lose unsynced writes, else UnsupportedFaultError."""
    disks = require_disks(cluster)
    capabilities = cluster.capabilities
    if not capabilities.lazy_disk:
        raise UnsupportedFaultError(
            f"power-loss is unavailable on this {capabilities.runtime} cluster: "
            f"{capabilities.lazy_disk_missing}"
        )
    return disks


def partition_key(
    value: Mapping[str, Any], targets: Sequence[str], topic_hint: str | None
) -> str | None:
    """The partition whose files a fault damages: its ``key``, else its ``aim``, else the
    partition its role targets name, else the Nemesis's topic hint."""
    for given in (value.get("key"), value.get("aim")):
        if isinstance(given, str):
            return given
    for target in targets:
        spec = parse_target(target)
        if spec.role in PARTITION_ROLES and spec.argument is not None:
            return spec.argument
    return topic_hint


def choose_file(files: Sequence[StoredFile], pick: str, rng: random.Random) -> StoredFile:
    if pick == "first":
        return files[0]
    if pick == "random":
        return rng.choice(list(files))
    return files[-1]


def draw_flips(size: int, bits: int, rng: random.Random) -> tuple[tuple[int, int], ...]:
    """``bits`` flips at distinct random places of a file of ``size`` bytes, in file order."""
    places = rng.sample(range(size * 8), min(bits, size * 8))
    return tuple((place // 8, place % 8) for place in sorted(places))


def draw_cut(size: int, max_bytes: int | None, rng: random.Random) -> int:
    """The size a file of ``size`` bytes is cut to: 1 to ``max_bytes`` bytes fewer."""
    most = size if max_bytes is None else min(size, max_bytes)
    return size - rng.randint(1, most) if most > 0 else size


def file_of(
    disks: Disks, node: str, kind: str, key: str | None, pick: str, rng: random.Random
) -> StoredFile:
    """The file of one kind a fault damages on node; ClusterError when it has none."""
    files = [f for f in disks.files(node, kind, key) if f.size > 0]
    if not files:
        where = f"partition {key}" if key is not None else "its data directory"
        raise StorageError(f"{node} has no non-empty {kind} file of {where} to damage")
    return choose_file(files, pick, rng)


class StorageError(ClusterError):
    """A node has nothing a storage fault could damage, or no snapshot to roll back to."""
