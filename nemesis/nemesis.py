"""The Nemesis: applies faults to a cluster, remembers what is broken, and heals it.

``apply`` takes a fault as requested and returns it as applied (targets resolved to node
names, the grudge computed, outcomes added): that is the history operation's value, with
``process: "nemesis"`` and type ``info``. ``heal`` undoes exactly what this nemesis has
broken; ``heal_all`` heals a cluster without knowing its past (end of a test, Ctrl-C,
``squall clean``).

Healing restores the network, thaws paused and frozen processes and removes the snapshots
of data directories it took. It does not restart killed processes (crashed by a kill, a
power loss or a damaged file) unless asked (``restart_killed=True``): a test may want to
watch the cluster recover, or not, with a node down. What a storage fault did on disk stays.
"""

from __future__ import annotations

import random
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from nemesis import member_faults, process_faults, storage
from nemesis.duty_cycle import DutyCycle, DutyCycleSpec
from nemesis.errors import ClusterError, FaultError, NemesisError, UnsupportedFaultError
from nemesis.fanout import on_each_node
from nemesis.fault import MEMBER_FAULTS, Fault
from nemesis.grudge import PartitionGrudge, shape_grudge, sorted_nodes
from nemesis.netem import NetemSpec, NetworkShaper
from nemesis.partial_failures import FaultApplicationError, HealError
from nemesis.partitioner import Partitioner
from nemesis.protocols import Disks, FaultableCluster, GroupMembers
from nemesis.targets import (
    ClusterView,
    Resolution,
    TargetSpec,
    needs,
    parse_target,
    resolve_targets,
)

_Handler = Callable[[Fault], Fault]


@dataclass
class ActiveFaults:
    """What a Nemesis has broken and not yet healed."""

    killed: set[str] = field(default_factory=set)
    paused: set[str] = field(default_factory=set)
    frozen: set[str] = field(default_factory=set)
    partition: PartitionGrudge | None = None
    netem: dict[str, NetemSpec] = field(default_factory=dict)
    slowed: dict[str, DutyCycle] = field(default_factory=dict)
    snapshots: dict[str, list[str]] = field(default_factory=dict)
    """The snapshots of each node's data directory, oldest first."""
    paused_members: set[str] = field(default_factory=set)
    """The workload's consumer-group members paused (``pause-member``)."""

    @property
    def quiet(self) -> bool:
        """Nothing is broken (killed nodes and snapshots count)."""
        return not (
            self.killed
            or self.paused
            or self.frozen
            or self.partition
            or self.netem
            or self.slowed
            or self.snapshots
            or self.paused_members
        )

    def held(self) -> set[str]:
        """Nodes another fault keeps stopped: a duty cycle leaves them alone."""
        return self.paused | self.frozen


class Nemesis:
    """Applies faults to one cluster; thread-safe, one fault at a time."""

    def __init__(
        self,
        cluster: FaultableCluster,
        *,
        rng: random.Random,
        topic_hint: str | None = None,
        partitions: Sequence[str] = (),
        start_timeout_s: float = 60.0,
        stop_timeout_s: float = 30.0,
        observe_timeout_s: float = 5.0,
        members: GroupMembers | None = None,
    ) -> None:
        """``rng`` makes every random choice (minority, random halves...); ``topic_hint`` is
        the ``TOPIC-PARTITION`` that ``leader`` and ``follower`` mean without one;
        ``partitions`` the workload's, across which ``idle-broker`` and ``idle-follower``
        look; ``members`` the workload's consumer-group members, for the member faults."""
        self.cluster = cluster
        self.members = members
        self.rng = rng
        self.topic_hint = topic_hint
        self.partitions = tuple(partitions)
        self.start_timeout_s = start_timeout_s
        self.stop_timeout_s = stop_timeout_s
        self.observe_timeout_s = observe_timeout_s
        self.active = ActiveFaults()
        self._partitioner = Partitioner(cluster)
        self._shaper = NetworkShaper(cluster)
        self._lock = threading.RLock()
        """Held around every fault on the cluster's nodes."""
        self._members_lock = threading.Lock()
        """Held around every fault on the workload's group members instead: a member's
        fault (a clean leave may take ``member_faults.LEAVE_TIMEOUT_S``) never holds up the
        nodes' faults, which scenarios time to the detectors."""
        self._signals = threading.Lock()
        """Held around signals that a duty cycle must not interleave with."""
        self._handlers: dict[str, _Handler] = {
            "kill": self._kill,
            "start": self._start,
            "bounce": self._bounce,
            "pause": self._pause,
            "resume": self._resume,
            "freeze": self._freeze,
            "unfreeze": self._unfreeze,
            "start-partition": self._start_partition,
            "stop-partition": self._stop_partition,
            "start-netem": self._start_netem,
            "stop-netem": self._stop_netem,
            "start-slow": self._start_slow,
            "stop-slow": self._stop_slow,
            "corrupt-file": self._damage_file,
            "truncate-file": self._damage_file,
            "snapshot": self._snapshot,
            "rollback": self._rollback,
            "drop-snapshots": self._drop_snapshots,
            "power-loss": self._power_loss,
            "pause-member": self._member_fault,
            "resume-member": self._member_fault,
            "kill-member": self._member_fault,
            "leave-member": self._member_fault,
        }
        self._snapshots_taken = 0

    # --- the protocol -----------------------------------------------------------------------

    def apply(self, fault: Fault) -> Fault:
        """Apply fault now; the fault as applied, for the history.

        Raises UnsupportedFaultError (the runtime cannot), FaultError (bad data),
        TargetError (a role has no holder now), or FaultApplicationError (some nodes
        failed; its ``applied`` is still worth recording).
        """
        with self._members_lock if fault.f in MEMBER_FAULTS else self._lock:
            return self._handlers[fault.f](fault.request())

    def heal(self, *, restart_killed: bool = False) -> list[Fault]:
        """Undo what this nemesis broke: thaw, resume, heal the network (and restart what
        it killed if asked). The healing faults done; [] when nothing was broken.

        Every step is tried; HealError lists the failures (``done`` holds the rest).
        """
        with self._lock:
            steps: list[Fault] = []
            if self.active.frozen:
                steps.append(Fault("unfreeze", {"targets": sorted_nodes(self.active.frozen)}))
            if self.active.paused:
                steps.append(Fault("resume", {"targets": sorted_nodes(self.active.paused)}))
            if self.active.paused_members:
                steps.append(
                    Fault("resume-member", {"members": sorted(self.active.paused_members)})
                )
            if self.active.partition is not None:
                steps.append(Fault("stop-partition"))
            if self.active.netem:
                steps.append(Fault("stop-netem", {"targets": sorted_nodes(self.active.netem)}))
            if self.active.slowed:
                steps.append(Fault("stop-slow", {"targets": sorted_nodes(self.active.slowed)}))
            if self.active.snapshots:
                steps.append(
                    Fault("drop-snapshots", {"targets": sorted_nodes(self.active.snapshots)})
                )
            if restart_killed and self.active.killed:
                steps.append(Fault("start", {"targets": sorted_nodes(self.active.killed)}))
            done, failures = _run_steps(self.apply, steps)
            if failures:
                raise HealError(failures, done)
            return done

    # --- consumer-group members ------------------------------------------------------------

    def _member_fault(self, fault: Fault) -> Fault:
        members = self.members
        if members is None:
            raise UnsupportedFaultError(
                f"{fault.f} needs the workload's consumers to be members of a group "
                "(group_membership) and a nemesis that holds them"
            )
        active = self.active.paused_members
        named = fault.value.get("members")
        if named is not None:
            names = list(named)
        elif fault.f == "resume-member":
            names = sorted(active)
        else:
            exclude = active if fault.f == "pause-member" else ()
            names = member_faults.choose(
                members, int(fault.value.get("count", 1)), self.rng, exclude=exclude
            )
        if fault.f == "pause-member":
            outcomes = member_faults.pause(members, names)
            active |= {n for n, outcome in outcomes.items() if outcome == "paused"}
        elif fault.f == "resume-member":
            outcomes = member_faults.resume(members, names)
            active -= set(names)
        elif fault.f == "kill-member":
            outcomes = member_faults.kill(members, names)
            active -= set(names)
        else:
            outcomes = member_faults.leave(members, names)
        return fault.with_value(members=names, outcome=outcomes)

    # --- process faults ---------------------------------------------------------------------

    def _kill(self, fault: Fault) -> Fault:
        names, details = self._resolve(fault)
        with self._signals:
            outcomes, failures = process_faults.kill(self.cluster, names)
            hit = {n for n, outcome in outcomes.items() if outcome == "killed"}
            self.active.killed |= hit
            self.active.paused -= hit
        return _finish(fault, names, details, outcomes, failures)

    def _start(self, fault: Fault) -> Fault:
        names, details = self._resolve(fault, default=sorted_nodes(self.active.killed))
        outcomes, failures = process_faults.start(
            self.cluster, names, timeout_s=self.start_timeout_s
        )
        self.active.killed -= set(outcomes)
        return _finish(fault, names, details, outcomes, failures)

    def _bounce(self, fault: Fault) -> Fault:
        names, details = self._resolve(fault)
        outcomes, failures = process_faults.bounce(
            self.cluster,
            names,
            stop_timeout_s=self.stop_timeout_s,
            start_timeout_s=self.start_timeout_s,
        )
        self.active.killed -= set(outcomes)
        self.active.paused -= set(outcomes)
        return _finish(fault, names, details, outcomes, failures)

    def _pause(self, fault: Fault) -> Fault:
        names, details = self._resolve(fault)
        with self._signals:
            outcomes, failures = process_faults.pause(self.cluster, names)
            self.active.paused |= {n for n, outcome in outcomes.items() if outcome == "paused"}
        return _finish(fault, names, details, outcomes, failures)

    def _resume(self, fault: Fault) -> Fault:
        names, details = self._resolve(fault, default=sorted_nodes(self.active.paused))
        outcomes, failures = process_faults.resume(self.cluster, names)
        self.active.paused -= set(outcomes)
        return _finish(fault, names, details, outcomes, failures)

    def _freeze(self, fault: Fault) -> Fault:
        process_faults.require_freezer(self.cluster)
        names, details = self._resolve(fault)
        with self._signals:
            outcomes, failures = process_faults.freeze(self.cluster, names)
            self.active.frozen |= set(outcomes)
        return _finish(fault, names, details, outcomes, failures)

    def _unfreeze(self, fault: Fault) -> Fault:
        process_faults.require_freezer(self.cluster)
        names, details = self._resolve(fault, default=sorted_nodes(self.active.frozen))
        outcomes, failures = process_faults.unfreeze(self.cluster, names)
        self.active.frozen -= set(outcomes)
        return _finish(fault, names, details, outcomes, failures)

    def _start_slow(self, fault: Fault) -> Fault:
        spec = DutyCycleSpec.from_value(fault.value)
        names, details = self._resolve(fault)
        outcomes: dict[str, str] = {}
        for name in names:
            self.cluster.node(name)  # KeyError naming the known nodes
            if name in self.active.slowed:
                outcomes[name] = "already-slowed"
                continue
            cycle = DutyCycle(
                self.cluster.daemons, name, spec, lock=self._signals, held=self.active.held
            )
            cycle.start()
            self.active.slowed[name] = cycle
            outcomes[name] = "slowed"
        applied = {**fault.value, **spec.to_value(), "targets": names, **details}
        return Fault(fault.f, {**applied, "outcome": outcomes})

    def _stop_slow(self, fault: Fault) -> Fault:
        names, details = self._resolve(fault, default=sorted_nodes(self.active.slowed))
        outcomes: dict[str, str] = {}
        cycles: dict[str, int] = {}
        for name in names:
            cycle = self.active.slowed.pop(name, None)
            if cycle is None:
                outcomes[name] = "not-slowed"
                continue
            cycle.stop()
            outcomes[name] = "resumed"
            cycles[name] = cycle.cycles
        value = {**fault.value, "targets": list(names), **details, "outcome": outcomes}
        return Fault(fault.f, {**value, "cycles": cycles})

    # --- storage faults ---------------------------------------------------------------------

    def _damage_file(self, fault: Fault) -> Fault:
        """corrupt-file and truncate-file: crash the brokers (unless ``crash`` is false), then
        damage one file of each; the crashed stay down until ``start``."""
        disks = storage.require_disks(self.cluster)
        value = dict(fault.value)
        kind = value.setdefault("file", "log")
        value.setdefault("pick", "last")
        if fault.f == "corrupt-file":
            value.setdefault("bits", storage.DEFAULT_BITS)
        crash = value.setdefault("crash", True)
        key = None
        if kind in storage.PARTITION_KINDS:
            key = storage.partition_key(value, fault.targets or [], self.topic_hint)
            if key is None:
                raise storage.StorageError(
                    f"{fault.f}: which partition's {kind}? give key, or a partition role target"
                )
            value["key"] = key
        names, details = self._resolve_brokers(fault)
        recorded = storage.damages(value, fault.f)
        killed: dict[str, str] = {}
        failures: dict[str, BaseException] = {}
        if crash:
            with self._signals:
                killed, failures = process_faults.kill(self.cluster, names)
                hit = {n for n, outcome in killed.items() if outcome == "killed"}
                self.active.killed |= hit
                self.active.paused -= hit
        outcomes: dict[str, str] = {}
        done: dict[str, Any] = {}
        for name in names:
            if name in failures:
                continue
            try:
                damage = recorded.get(name) or self._draw_damage(fault.f, value, disks, name, key)
                if damage.to_size is None:
                    flipped = disks.flip_bits(name, damage.path, damage.flips)
                    outcomes[name] = (
                        "corrupted" if flipped == len(damage.flips) else "flips-skipped"
                    )
                else:
                    disks.truncate(name, damage.path, damage.to_size)
                    outcomes[name] = "truncated"
                done[name] = damage.to_json()
            except _STEP_ERRORS as err:
                failures[name] = err
        value.update(targets=names, **details, damage=done, outcome=outcomes)
        if crash:
            value["killed"] = sorted(n for n, word in killed.items() if word == "killed")
        return _raise_failures(Fault(fault.f, value), failures)

    def _draw_damage(
        self, f: str, value: Mapping[str, Any], disks: Disks, name: str, key: str | None
    ) -> storage.Damage:
        """Which file of node ``name`` and which of its bytes: drawn from the seeded rng."""
        chosen = storage.file_of(disks, name, value["file"], key, value["pick"], self.rng)
        if f == "corrupt-file":
            flips = storage.draw_flips(chosen.size, value["bits"], self.rng)
            return storage.Damage(chosen.path, chosen.size, flips)
        cut = storage.draw_cut(chosen.size, value.get("max_bytes"), self.rng)
        return storage.Damage(chosen.path, chosen.size, to_size=cut)

    def _snapshot(self, fault: Fault) -> Fault:
        """Copy each target's data directory, its broker paused for the copy (a crash-
        consistent image, as a disk snapshot is)."""
        disks = storage.require_disks(self.cluster)
        name = fault.value.get("name") or f"snap-{self._snapshots_taken}"
        self._snapshots_taken += 1
        names, details = self._resolve_brokers(fault)
        daemons = self.cluster.daemons

        def copy(node: str) -> int:
            held = node in self.active.held()
            paused = not held and daemons.pause(node)
            try:
                return disks.snapshot(node, name)
            finally:
                if paused:
                    daemons.resume(node)

        with self._signals:
            copied, failures = on_each_node(names, copy)
        for node in copied:
            taken = self.active.snapshots.setdefault(node, [])
            taken[:] = [*(n for n in taken if n != name), name]
        value = {**fault.value, "name": name, "targets": names, **details}
        value.update(copied=copied, outcome={n: "taken" for n in copied})
        return _raise_failures(Fault(fault.f, value), failures)

    def _rollback(self, fault: Fault) -> Fault:
        """Crash each target's broker, put its snapshot in place of its data directory and
        start it again (left down if another fault keeps it down)."""
        disks = storage.require_disks(self.cluster)
        names, details = self._resolve_brokers(fault, default=sorted_nodes(self.active.snapshots))
        named = dict(fault.value.get("snapshots") or {})
        chosen: dict[str, str] = {}
        failures: dict[str, BaseException] = {}
        for node in names:
            snapshot = named.get(node) or fault.value.get("name")
            taken = self.active.snapshots.get(node) or []
            snapshot = snapshot or (taken[-1] if taken else None)
            if snapshot is None:
                failures[node] = storage.StorageError(f"{node} has no snapshot to roll back to")
            else:
                chosen[node] = snapshot
        daemons = self.cluster.daemons
        held_down = set(self.active.killed)

        def roll_back(node: str) -> str:
            with self._signals:
                daemons.kill(node)
                self.active.paused.discard(node)
                self.active.killed.add(node)  # until it serves again
            disks.restore(node, chosen[node])
            if node in held_down:
                return "rolled-back-down"
            daemons.start(node, timeout_s=self.start_timeout_s)
            self.active.killed.discard(node)
            return "rolled-back"

        outcomes, more = on_each_node(sorted_nodes(chosen), roll_back)
        value = {**fault.value, "targets": names, **details, "snapshots": chosen}
        value["outcome"] = outcomes
        return _raise_failures(Fault(fault.f, value), {**failures, **more})

    def _drop_snapshots(self, fault: Fault) -> Fault:
        disks = storage.require_disks(self.cluster)
        names, details = self._resolve(fault, default=sorted_nodes(self.active.snapshots))
        dropped, failures = on_each_node(names, disks.drop_snapshots)
        for node in dropped:
            self.active.snapshots.pop(node, None)
        outcomes = {n: "dropped" if gone else "no-snapshots" for n, gone in dropped.items()}
        return _finish(fault, names, details, outcomes, failures)

    def _power_loss(self, fault: Fault) -> Fault:
        """Kill each target's broker and, at that instant, drop what its filesystem had not
        synced; the brokers stay down until ``start``."""
        disks = storage.require_lazy_disk(self.cluster)
        names, details = self._resolve_brokers(fault)
        daemons = self.cluster.daemons

        def lose_power(node: str) -> dict[str, int]:
            daemons.kill(node)
            return dict(disks.lose_unsynced(node))

        with self._signals:
            lost, failures = on_each_node(names, lose_power)
            self.active.killed |= set(lost)
            self.active.paused -= set(lost)
        value = {**fault.value, "targets": names, **details, "lost": lost}
        value["outcome"] = {n: "lost-power" for n in lost}
        return _raise_failures(Fault(fault.f, value), failures)

    # --- network faults ---------------------------------------------------------------------

    def _start_partition(self, fault: Fault) -> Fault:
        self._partitioner.require_support()
        value = dict(fault.value)
        grudge = fault.grudge
        if grudge is None:
            resolved, details = self._resolve_keys(fault, ("targets", "destinations"))
            among = value.setdefault("among", "all")
            brokers = sorted_nodes(self.cluster.brokers)
            zookeeper = self.cluster.zookeeper.name
            with_zookeeper = among == "all" and self.cluster.capabilities.zookeeper
            grudge = shape_grudge(
                value["shape"],
                [*brokers, zookeeper] if with_zookeeper else brokers,
                rng=self.rng,
                targets=resolved.get("targets", []),
                destinations=resolved.get("destinations", []),
                zookeeper=zookeeper,
            )
            value.update(resolved, **details)
        value["grudge"] = grudge.to_json()
        failures = self._partitioner.apply(grudge)
        self.active.partition = grudge
        return _raise_failures(Fault(fault.f, value), failures)

    def _stop_partition(self, fault: Fault) -> Fault:
        self._partitioner.require_support()
        value = dict(fault.value)
        if self.active.partition is not None:
            value["healed"] = self.active.partition.to_json()
        failures = self._partitioner.heal()
        if not failures:
            self.active.partition = None
        return _raise_failures(Fault(fault.f, value), failures)

    def _start_netem(self, fault: Fault) -> Fault:
        self._shaper.require_support()
        spec = NetemSpec.from_value(fault.value)
        if fault.targets is None:
            fault = fault.with_value(targets=["all"])
        names, details = self._resolve(fault)
        interfaces, failures = self._shaper.apply(names, spec)
        unsupported = [e for e in failures.values() if isinstance(e, UnsupportedFaultError)]
        if unsupported and not interfaces:
            raise unsupported[0]
        self.active.netem.update({name: spec for name in interfaces})
        value = {**fault.value, **spec.to_value(), "targets": names, **details}
        value["interfaces"] = interfaces
        return _raise_failures(Fault(fault.f, value), failures)

    def _stop_netem(self, fault: Fault) -> Fault:
        self._shaper.require_support()
        names, details = self._resolve(fault, default=sorted_nodes(self.active.netem))
        outcomes, failures = self._shaper.clear(names)
        for name in outcomes:
            self.active.netem.pop(name, None)
        return _finish(fault, names, details, outcomes, failures)

    # --- targets ----------------------------------------------------------------------------

    def _resolve(
        self, fault: Fault, *, default: Sequence[str] | None = None
    ) -> tuple[list[str], dict[str, Any]]:
        """Node names of the fault's targets (default when it has none) and the details."""
        if fault.targets is None and default is not None:
            return list(default), {}
        resolved, details = self._resolve_keys(fault, ("targets",))
        return resolved.get("targets", []), details

    def _resolve_brokers(
        self, fault: Fault, *, default: Sequence[str] | None = None
    ) -> tuple[list[str], dict[str, Any]]:
        """The targets, as for ``_resolve``; FaultError before anything is done when one of
        them runs no broker (storage faults hit brokers' data directories)."""
        names, details = self._resolve(fault, default=default)
        others = [name for name in names if name not in self.cluster.brokers]
        if others:
            raise FaultError(
                f"{fault.f} hits brokers' data directories, and {', '.join(others)} runs no "
                "broker; target brokers (a role, random, minority, brokers or n1..)"
            )
        return names, details

    def _resolve_keys(
        self, fault: Fault, keys: Sequence[str]
    ) -> tuple[dict[str, list[str]], dict[str, Any]]:
        """Resolve the target lists under keys in one observation of the cluster."""
        written = {key: list(fault.value[key]) for key in keys if key in fault.value}
        specs = {key: [parse_target(t) for t in targets] for key, targets in written.items()}
        every = [spec for key_specs in specs.values() for spec in key_specs]
        partition_keys, controller = needs(every, self.topic_hint, self.partitions)
        if partition_keys or controller:
            view = self.cluster.roles.observe(
                partition_keys, controller=controller, timeout_s=self.observe_timeout_s
            )
        else:
            view = ClusterView(tuple(self.cluster.brokers), self.cluster.zookeeper.name)
        resolutions: dict[str, Resolution] = {
            key: resolve_targets(key_specs, view, self.rng, topic_hint=self.topic_hint)
            for key, key_specs in specs.items()
        }
        resolved = {key: list(resolution.nodes) for key, resolution in resolutions.items()}
        details: dict[str, Any] = {}
        # Details only when some target was more than a bare node name.
        if any(TargetSpec.node(t) != spec for t, spec in zip(_flat(written), every, strict=True)):
            details["requested"] = written
            details["roles"] = {
                role: nodes
                for r in resolutions.values()
                for role, nodes in r.roles.items()
                if parse_target(role).role != "node"
            }
        observed: dict[str, Any] = {
            key: state for r in resolutions.values() for key, state in r.observed.items()
        }
        if controller:
            observed["controller"] = view.controller
        if observed:
            details["observed"] = observed
            details["source"] = view.source
        return resolved, details


def _flat(written: Mapping[str, Sequence[str]]) -> list[str]:
    return [target for targets in written.values() for target in targets]


def _finish(
    fault: Fault,
    names: Sequence[str],
    details: Mapping[str, Any],
    outcomes: Mapping[str, str],
    failures: Mapping[str, BaseException],
) -> Fault:
    applied = Fault(
        fault.f, {**fault.value, "targets": list(names), **details, "outcome": dict(outcomes)}
    )
    return _raise_failures(applied, failures)


def _raise_failures(applied: Fault, failures: Mapping[str, BaseException]) -> Fault:
    if failures:
        errors = {node: f"{type(err).__name__}: {err}" for node, err in sorted(failures.items())}
        raise FaultApplicationError(applied.with_value(error=errors), failures)
    return applied


_STEP_ERRORS = (NemesisError, ClusterError, KeyError, OSError)


def _run_steps(
    apply: Callable[[Fault], Fault], steps: Sequence[Fault]
) -> tuple[list[Fault], list[str]]:
    """Apply every step even if some fail; (what was applied, failure messages)."""
    done: list[Fault] = []
    failures: list[str] = []
    for step in steps:
        try:
            done.append(apply(step))
        except FaultApplicationError as err:
            done.append(err.applied)
            failures.append(str(err))
        except _STEP_ERRORS as err:
            failures.append(f"{step.f}: {type(err).__name__}: {err}")
    return done, failures


def heal_all(
    cluster: FaultableCluster,
    *,
    restart_killed: bool = False,
    start_timeout_s: float = 60.0,
) -> list[Fault]:
    """Heal a cluster without knowing what was done to it; safe to call any number of times.

    Thaws every node (on runtimes that freeze), continues every daemon,
    flushes the SQUALL chain and removes netem everywhere (where the runtime has them),
    removes every snapshot of the brokers' data directories (where it can reach them), and
    with ``restart_killed`` starts every daemon that is not running (ZooKeeper first).
    Every node is tried; HealError lists all failures at the end.
    """
    names = [node.name for node in cluster.all_nodes()]
    done: list[Fault] = []
    failures: list[str] = []

    def record(
        f: str,
        outcome: tuple[Mapping[str, str], Mapping[str, BaseException]],
        targets: Sequence[str] = names,
    ) -> None:
        outcomes, errors = outcome
        value: dict[str, Any] = {"targets": list(targets), "outcome": dict(outcomes)}
        if errors:
            value["error"] = {n: f"{type(e).__name__}: {e}" for n, e in sorted(errors.items())}
            failures.extend(f"{f} on {n}: {e}" for n, e in sorted(errors.items()))
        done.append(Fault(f, value))

    capabilities = cluster.capabilities
    if cluster.freezer is not None and capabilities.freeze:
        record("unfreeze", process_faults.unfreeze(cluster, names))
    record("resume", process_faults.resume(cluster, names))
    if capabilities.partitions:
        errors = Partitioner(cluster).heal()
        record("stop-partition", ({n: "healed" for n in names if n not in errors}, errors))
    if capabilities.netem:
        record("stop-netem", NetworkShaper(cluster).clear(names))
    disks = cluster.disks
    if disks is not None and capabilities.disks:
        brokers = sorted_nodes(cluster.brokers)
        dropped, errors = on_each_node(brokers, disks.drop_snapshots)
        outcomes = {n: "dropped" if gone else "no-snapshots" for n, gone in dropped.items()}
        record("drop-snapshots", (outcomes, errors), brokers)
    if restart_killed:
        record("start", process_faults.start(cluster, names, timeout_s=start_timeout_s))
    if failures:
        raise HealError(failures, done)
    return done
