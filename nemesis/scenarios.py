"""Scenarios aimed at the failure modes of a replicated log: the states where replication
bugs show (a leader change with writes in flight, an ISR that shrank to its leader, a
replica truncating after a failover).

Each scenario lays a few faults out on a timeline (``nemesis.layout.Layout``), targeted
by role (``leader``, ``followers``, ``controller``) and timed around the cluster's
detectors, so that every fault outlasts what it must outlast. Each run aims at one
partition of the workload (or of its consumer groups' state, whose leader is a group's
coordinator), picked by the scenario's ``aim`` rule when its first fault strikes
(``nemesis.aim``); roles are that partition's, resolved when each fault strikes; a
step that must hit the node an earlier step hit says ``same_as``. Each scenario says how to
tell from the SUT's events that a run reached its state (``reached``, ``nemesis.reach``).
A scenario gets to its state in one or more ways (``Variant``: the leader cut off, or
paused...). Each run lays out one drawn among those the runtime can apply; where the
runtime cannot partition, that is the process-fault variant (a paused process is cut off
as surely as a partitioned one), or the scenario is not available; scenarios that damage
disks need the runtime's ``disks``, and those that cut power its ``lazy-disk``. A run that missed its
state is tried again another way (``Scenario.after``: the next variant, durations from the
longer half of their ranges).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass

from nemesis import reach
from nemesis.errors import FaultError
from nemesis.fault import Fault
from nemesis.layout import Layout
from nemesis.reach import Judge
from nemesis.timing import Span

Lay = Callable[[Layout, float], float]


@dataclass(frozen=True)
class Variant:
    """One way a scenario gets to its state: how it lays its faults out, and what it needs."""

    name: str
    lay: Lay
    needs: str | tuple[str, ...] | None = None
    """The capabilities it cannot do without (``partitions``, ``disks``, ``lazy-disk``,
    ``zookeeper``: one or several), or None."""

    @property
    def requires(self) -> tuple[str, ...]:
        """``needs`` as a tuple."""
        if self.needs is None:
            return ()
        return (self.needs,) if isinstance(self.needs, str) else self.needs

    def available(self, layout: Layout) -> bool:
        return all(layout.can(capability) for capability in self.requires)


def needs_of(variants: Iterable[Variant]) -> str | None:
    """What a runtime needs to apply one of ``variants``, in words, or None: one needs
    nothing."""
    ways = {frozenset(v.requires) for v in variants}
    least = {way for way in ways if not any(other < way for other in ways)}
    if frozenset() in least:
        return None
    return " or ".join(sorted(" and ".join(sorted(way)) for way in least))


@dataclass(frozen=True)
class Scenario:
    """A named scenario: what it aims at, the ways it gets there, how to tell it did."""

    name: str
    aims_at: str
    variants: tuple[Variant, ...]
    reached: Judge
    """Whether a run reached the state, from the SUT's events (``nemesis.reach``)."""
    aim: str = "any"
    """How a run picks its partition among the workload's (``nemesis.aim.RULES``)."""

    @property
    def needs(self) -> str | None:
        """What a runtime needs to apply some variant ("partitions", "lazy-disk and
        partitions", "disks or partitions"), or None when a variant needs nothing."""
        return needs_of(self.variants)

    def available(self, layout: Layout) -> bool:
        return bool(self.usable(layout))

    def usable(self, layout: Layout) -> tuple[Variant, ...]:
        """The variants the runtime of ``layout`` can apply."""
        return tuple(v for v in self.variants if v.available(layout))

    def variant(self, name: str) -> Variant:
        """The variant called ``name``; FaultError listing them when there is none."""
        for variant in self.variants:
            if variant.name == name:
                return variant
        raise FaultError(
            f"scenario {self.name} has no variant {name!r}; its variants: "
            f"{', '.join(v.name for v in self.variants)}"
        )

    def choose(self, layout: Layout) -> Variant:
        """A variant the runtime can apply, drawn evenly."""
        usable = self.usable(layout)
        if not usable:
            raise FaultError(f"scenario {self.name} needs {self.needs}, which this runtime lacks")
        if len(usable) == 1:
            return usable[0]
        return usable[int(layout.rng.random() * len(usable))]

    def lay(self, layout: Layout, start: float) -> float:
        """Lay out one run from ``start``, a variant drawn; when it ends."""
        return self.choose(layout).lay(layout, start)

    def after(self, layout: Layout, previous: str | None) -> Variant:
        """The variant to try after a run laid out as ``previous`` missed its state: the next
        one the runtime can apply, in turn (the same one when it is the only one)."""
        usable = self.usable(layout)
        names = [v.name for v in usable]
        if previous not in names:
            return self.choose(layout)
        return usable[(names.index(previous) + 1) % len(usable)]


def _partition(layout: Layout, at: float, *, shape: str, among: str, targets: list[str]) -> int:
    return layout.add(
        at, Fault("start-partition", {"shape": shape, "among": among, "targets": targets})
    )


def _one_way(layout: Layout, at: float, *, sources: list[str], destinations: list[str]) -> int:
    return layout.add(
        at,
        Fault(
            "start-partition",
            {
                "shape": "one-way",
                "among": "brokers",
                "targets": sources,
                "destinations": destinations,
            },
        ),
    )


def zombie_leader_cut_off(layout: Layout, start: float) -> float:
    """The leader cut off from ZooKeeper and its followers while clients still reach it, past
    the session timeout (the controller elects another leader), then healed: the deposed
    leader must neither acknowledge what the new one does not have nor keep serving reads."""
    hold = layout.draw(Span(1.3, 2.0, "session"))
    cut = _partition(layout, start, shape="isolate", among="all", targets=["leader"])
    layout.add(start + hold, Fault("stop-partition"), heals=cut)
    return start + hold


def zombie_leader_paused(layout: Layout, start: float) -> float:
    """The zombie leader without partitions: paused past its session (a long GC pause),
    then resumed."""
    hold = layout.draw(Span(1.3, 2.0, "session"))
    paused = layout.add(start, Fault("pause", {"targets": ["leader"]}))
    layout.add(start + hold, Fault("resume"), heals=paused)
    return start + hold


def _leader_back(layout: Layout, killed: int, start: float, shrink: float) -> float:
    back = start + shrink + layout.draw(Span(1.3, 2.0, "session"))
    layout.add(back, Fault("start"), heals=killed)
    return back


def coordinator_killed(layout: Layout, start: float) -> float:
    """The group's coordinator (the leader of the partition holding the group's state)
    killed while its members heartbeat and commit: once its session ends another broker
    leads the partition and loads the group from its log; members find it and rejoin. The
    old coordinator returns a session or so later."""
    killed = layout.add(start, Fault("kill", {"targets": ["leader"]}))
    back = start + layout.draw(Span(1.3, 2.0, "session"))
    layout.add(back, Fault("start"), heals=killed)
    return back


def isr_shrink_leader_cut_off(layout: Layout, start: float) -> float:
    """The followers fall out of the ISR for longer than the lag time while writes go on
    (the leader cut off from them), then the leader dies, then they come back: the ISR holds
    only the dead leader, so the partition stays offline, or, where unclean election is
    allowed, a stale follower leads. The leader comes back a session later."""
    shrink = layout.draw(Span(1.2, 1.5, "lag"))
    cut = _partition(layout, start, shape="isolate", among="brokers", targets=["leader"])
    killed = layout.add(start + shrink, Fault("kill", {"targets": ["leader"]}), same_as=cut)
    layout.add(start + shrink + 0.5, Fault("stop-partition"), heals=cut)
    return _leader_back(layout, killed, start, shrink)


def isr_shrink_followers_paused(layout: Layout, start: float) -> float:
    """The same ISR of one, the followers paused instead of cut off."""
    shrink = layout.draw(Span(1.2, 1.5, "lag"))
    paused = layout.add(start, Fault("pause", {"targets": ["followers"]}))
    killed = layout.add(start + shrink, Fault("kill", {"targets": ["leader"]}))
    layout.add(start + shrink + 0.5, Fault("resume"), heals=paused)
    return _leader_back(layout, killed, start, shrink)


def follower_restart_leader_loss(layout: Layout, start: float) -> float:
    """KIP-101's first sequence: the followers crash and come back (and, made followers
    again, truncate as their protocol says) while the leader can no longer serve them, and
    the leader is lost before they catch up; one of them leads with whatever its truncation
    left. The leader is paused only after the followers are down, so that a controller that
    did not see them crash (a new one, when the controller was among them) makes them
    followers of it again, in the ISR, before its session ends. The old leader, killed
    while paused, returns as a follower."""
    restarted = layout.add(start, Fault("kill", {"targets": ["followers"]}))
    layout.add(start + layout.draw(Span(0.05, 0.1, "session")), Fault("start"), heals=restarted)
    paused_at = start + layout.draw(Span(0.35, 0.45, "session"))
    paused = layout.add(paused_at, Fault("pause", {"targets": ["leader"]}))
    killed_at = paused_at + layout.draw(Span(1.5, 1.8, "session"))
    killed = layout.add(killed_at, Fault("kill", {"targets": ["leader"]}), same_as=paused)
    back = killed_at + layout.draw(Span(1.0, 1.5, "session"))
    layout.add(back, Fault("start"), heals=killed)
    return back


def follower_restart_leader_loss_rejoined(layout: Layout, start: float) -> float:
    """KIP-101's first sequence where the controller sees every restart: the followers crash
    and come back (truncating as their protocol says), are shrunk out of the ISR as restarted
    replicas, and rejoin it once their leader finds them caught up to its high watermark;
    the leader dies soon after, and one of them leads with what its truncation and catch-up
    left. The controller is among the followers (the aim keeps it off the leader), so a new
    one makes them followers only once the old one's session has ended."""
    restarted = layout.add(start, Fault("kill", {"targets": ["followers"]}))
    layout.add(start + layout.draw(Span(0.05, 0.1, "session")), Fault("start"), heals=restarted)
    killed_at = start + layout.draw(Span(1.4, 1.7, "session"))
    killed = layout.add(killed_at, Fault("kill", {"targets": ["leader"]}))
    back = killed_at + layout.draw(Span(1.3, 1.6, "session"))
    layout.add(back, Fault("start"), heals=killed)
    return back


def _past_a_request(layout: Layout) -> float:
    """A stall a little longer than the clients' request timeout, if that fits well within
    the lag time; else a tenth of the lag time."""
    past = layout.draw(Span(1.1, 1.3, "request"))
    if past <= 0.8 * layout.detectors.unit("lag"):
        return past
    return layout.draw(Span(0.1, 0.15, "lag"))


def _second_failover(layout: Layout, first: int, returns: float) -> float:
    """The old leader back, and the new leader killed while the old one truncates."""
    layout.add(returns, Fault("start"), heals=first)
    second_at = returns + layout.draw(Span(0.3, 1.5, "s"))
    second = layout.add(second_at, Fault("kill", {"targets": ["leader"]}))
    back = second_at + layout.draw(Span(1.3, 2.0, "session"))
    layout.add(back, Fault("start"), heals=second)
    return back


def failover_during_truncation_cut_off(layout: Layout, start: float) -> float:
    """KIP-101's second sequence: the followers stall for a moment (within the lag time, so
    they stay in the ISR) while writes reach the leader, then the leader dies: another leads,
    the old one comes back with writes the new leader never had and must truncate them, and
    the new leader dies while it does. Replicas that truncate by the wrong rule diverge or
    lose acknowledged writes. The stall is a one-way cut: the leader's traffic to the other
    brokers is dropped until it comes back. Their fetches still arrive, so it acknowledges
    what they last fetched and clients keep sending; what they send next it appends alone
    (a cut both ways, or paused followers, leaves clients waiting on writes the followers
    already fetched, and the leader with no tail of its own). The followers keep serving
    what they lead. The cut outlasts the clients' request timeout (within the lag time, so
    the followers stay in the ISR): a connection whose acks=-1 produce the cut left waiting
    holds every request pipelined behind it, so only once that produce times out does the
    leader append what the clients send next alone."""
    first_at = start + _past_a_request(layout)
    returns = first_at + layout.draw(Span(1.2, 1.5, "session"))
    cut = _one_way(layout, start, sources=["leader"], destinations=["followers"])
    first = layout.add(first_at, Fault("kill", {"targets": ["leader"]}), same_as=cut)
    layout.add(returns, Fault("stop-partition"), heals=cut)
    return _second_failover(layout, first, returns)


def failover_during_truncation_paused(layout: Layout, start: float) -> float:
    """The same second sequence, the followers paused (and then clients wait on what they
    lead), resumed 0.2 s after the leader dies."""
    first_at = start + layout.draw(Span(0.1, 0.15, "lag"))
    returns = first_at + layout.draw(Span(1.2, 1.5, "session"))
    stalled = layout.add(start, Fault("pause", {"targets": ["followers"]}))
    first = layout.add(first_at, Fault("kill", {"targets": ["leader"]}))
    layout.add(first_at + 0.2, Fault("resume"), heals=stalled)
    return _second_failover(layout, first, returns)


def failover_chain(layout: Layout, start: float) -> float:
    """KIP-101's first sequence with no restart: a follower whose high watermark is behind
    what was acknowledged is made follower of a new leader (and truncates as its protocol
    says), cannot fetch from it, and leads next when that one dies too.

    The follower a clean election picks last (``last-follower``) is slowed (its process
    stopped 200 ms of every 300 ms: it stays in the ISR, but each fetch brings a few hundred
    milliseconds of records, and the high watermark that comes with them is behind them all),
    then stops hearing the leader (a one-way cut: its fetches still arrive, so the leader
    acknowledges what it last fetched, the other follower being ahead, while it never learns
    that high watermark), and the leader dies. Before its session ends the cut changes and
    the follower runs at full speed again: the other followers stop hearing the last one too
    (and no one hears the dead leader), so the other follower, elected, answers none of its
    fetches, while whoever is controller still reaches both. The new leader dies 1.3-1.6
    sessions after the first (after the election, before the lag time drops the last
    follower from its ISR), the last follower leads with what its truncation left, and
    everything heals 1.3-1.6 sessions later. The partition's leader is not the controller:
    a controller that survives the first kill already holds its connections to the last
    follower, where a new one could not open one through the cut (the answers of the
    handshake would be dropped), and the last follower would never hear of the new leader."""
    slowed = layout.add(
        start,
        Fault("start-slow", {"targets": ["last-follower"], "stopped_ms": 200, "running_ms": 100}),
    )
    cut_at = start + layout.draw(Span(1.0, 1.5, "s"))
    stale = _one_way(layout, cut_at, sources=["leader"], destinations=["last-follower"])
    first_at = cut_at + layout.draw(Span(0.2, 0.4, "s"))
    first = layout.add(first_at, Fault("kill", {"targets": ["leader"]}))
    swap_at = first_at + layout.draw(Span(0.5, 0.6, "session"))
    layout.add(swap_at, Fault("stop-slow"), heals=slowed)
    layout.add(swap_at, Fault("stop-partition"), heals=stale)
    cut = _one_way(layout, swap_at, sources=["leader", "last-follower"], destinations=["followers"])
    second_at = first_at + layout.draw(Span(1.3, 1.6, "session"))
    second = layout.add(second_at, Fault("kill", {"targets": ["leader"]}))
    end = second_at + layout.draw(Span(1.3, 1.6, "session"))
    layout.add(end, Fault("stop-partition"), heals=cut)
    layout.add(end, Fault("start"), heals=first)
    layout.add(end, Fault("start"), heals=second)
    return end


def controller_failover_during_election(layout: Layout, start: float) -> float:
    """The partition's leader and the controller die together (often one node): the new
    controller must elect from ZooKeeper's state alone, with writes in flight."""
    killed = layout.add(start, Fault("kill", {"targets": ["leader", "controller"]}))
    back = start + layout.draw(Span(1.3, 2.0, "session"))
    layout.add(back, Fault("start"), heals=killed)
    return back


def leader_session_loss(layout: Layout, start: float) -> float:
    """The leader loses ZooKeeper only (it still sees its followers and clients) past the
    session timeout: it must stop acting as leader once fenced, and rejoin after."""
    cut = _partition(layout, start, shape="isolate-zk", among="all", targets=["leader"])
    end = start + layout.draw(Span(1.3, 2.0, "session"))
    layout.add(end, Fault("stop-partition"), heals=cut)
    return end


def controller_session_loss(layout: Layout, start: float) -> float:
    """The controller loses ZooKeeper past the session timeout: another broker becomes
    controller, and the old one must stop acting at once."""
    cut = _partition(layout, start, shape="isolate-zk", among="all", targets=["controller"])
    end = start + layout.draw(Span(1.3, 2.0, "session"))
    layout.add(end, Fault("stop-partition"), heals=cut)
    return end


def slow_follower_failover(layout: Layout, start: float) -> float:
    """A follower slowed, not cut off (its process stopped two thirds of the time: it keeps
    its session and its place in the ISR, but fetches late), then the leader paused past its
    session: leadership moves while replication lags, so acks=-1 records wait on a new leader
    for a slow follower while the old leader, resumed, still holds requests it must answer
    (or refuse) late. The follower runs at full speed again a little after. The follower
    slowed is one that leads no partition (``idle-follower``, where the run's partition has
    one): slowing a broker slows what it leads too, and a slow leader is another state."""
    slowed = layout.add(
        start,
        Fault("start-slow", {"targets": ["idle-follower"], "stopped_ms": 200, "running_ms": 100}),
    )
    paused_at = start + layout.draw(Span(0.3, 0.5, "session"))
    paused = layout.add(paused_at, Fault("pause", {"targets": ["leader"]}))
    resumed_at = paused_at + layout.draw(Span(1.3, 2.0, "session"))
    layout.add(resumed_at, Fault("resume"), heals=paused)
    end = resumed_at + layout.draw(Span(0.3, 0.5, "session"))
    layout.add(end, Fault("stop-slow"), heals=slowed)
    return end


def rolling_bounce(layout: Layout, start: float) -> float:
    """Every broker bounced cleanly in turn, as an operator's rolling restart does: each
    leader moves away and back while writes go on."""
    at = start
    for broker in layout.brokers:
        layout.add(at, Fault("bounce", {"targets": [broker]}))
        at += layout.draw(Span(2.0, 4.0, "s"))
    return at


def _damaged_then_leader_lost(layout: Layout, start: float, damage: Fault) -> float:
    damaged = layout.add(start, damage)
    back = start + layout.draw(Span(0.3, 0.5, "session"))
    layout.add(back, Fault("start"), heals=damaged)
    killed_at = back + layout.draw(Span(0.0, 0.3, "s"))
    killed = layout.add(killed_at, Fault("kill", {"targets": ["leader"]}))
    end = killed_at + layout.draw(Span(1.3, 2.0, "session"))
    layout.add(end, Fault("start"), heals=killed)
    return end


def minority_corruption_corrupt(layout: Layout, start: float) -> float:
    """A follower's disk damaged (its broker crashed, then bits of its active segment
    flipped), the follower started again 0.3-0.5 sessions later (within the lag time, so it
    may still be in the ISR: recovery cuts its log at the damage, and it must fetch again
    what it lost), then the leader killed at once: an election must not make the damaged
    replica leader with less than was acknowledged. The leader comes back 1.3-2.0 sessions
    later."""
    return _damaged_then_leader_lost(
        layout, start, Fault("corrupt-file", {"targets": ["follower"]})
    )


def minority_corruption_truncate(layout: Layout, start: float) -> float:
    """The same with the follower's active segment's tail chopped instead."""
    return _damaged_then_leader_lost(
        layout, start, Fault("truncate-file", {"targets": ["follower"]})
    )


def follower_rollback(layout: Layout, start: float) -> float:
    """A follower's data directory snapshotted, then, 0.5-1.0 lag times of writes later,
    the follower rolled back to it (crashed, its disk restored from that backup, started),
    and the leader killed right after: a replica that lost acknowledged writes to an old
    backup must catch up or be kept out of the election, never lead with less. The leader
    comes back 1.3-2.0 sessions later."""
    taken = layout.add(start, Fault("snapshot", {"targets": ["follower"]}))
    rolled_at = start + layout.draw(Span(0.5, 1.0, "lag"))
    layout.add(rolled_at, Fault("rollback"), heals=taken)
    killed_at = rolled_at + layout.draw(Span(0.0, 0.3, "s"))
    killed = layout.add(killed_at, Fault("kill", {"targets": ["leader"]}))
    end = killed_at + layout.draw(Span(1.3, 2.0, "session"))
    layout.add(end, Fault("start"), heals=killed)
    return end


def leader_power_loss(layout: Layout, start: float) -> float:
    """The leader loses power with writes in flight (what it had not fsynced is gone), and
    comes back 1.3-2.0 sessions later as a follower with a shorter log."""
    lost = layout.add(start, Fault("power-loss", {"targets": ["leader"]}))
    end = start + layout.draw(Span(1.3, 2.0, "session"))
    layout.add(end, Fault("start"), heals=lost)
    return end


def paused_followers_leader_power_loss(layout: Layout, start: float) -> float:
    """NATS's sequence (its issues 7564 and 7567): the followers paused, the leader loses
    power 0.1-0.2 sessions later, the followers resume at once and the leader comes back
    1.3-2.0 sessions later: the followers hold what the leader acknowledged and it lost,
    the leader what they never had."""
    paused = layout.add(start, Fault("pause", {"targets": ["followers"]}))
    lost_at = start + layout.draw(Span(0.1, 0.2, "session"))
    lost = layout.add(lost_at, Fault("power-loss", {"targets": ["leader"]}))
    layout.add(lost_at + 0.2, Fault("resume"), heals=paused)
    end = lost_at + layout.draw(Span(1.3, 2.0, "session"))
    layout.add(end, Fault("start"), heals=lost)
    return end


def isr_shrink_leader_power_loss(layout: Layout, start: float) -> float:
    """An ISR of one, then the power of that one: the leader cut off from the other brokers
    (not from ZooKeeper or clients) for longer than the lag time, so it shrinks the ISR to
    itself while writes go on, then it loses power with what it had not fsynced; the cut
    heals 0.5 s later and the leader comes back 1.3-2.0 sessions after that. Every write
    acknowledged while the ISR was larger is on the followers; what only the leader held
    and had not fsynced is gone. Whether those writes may be lost is the configuration's
    promise: ``min.insync.replicas`` 1 allowed an ISR of one to acknowledge them, 2 did not."""
    shrink = layout.draw(Span(1.2, 1.5, "lag"))
    cut = _partition(layout, start, shape="isolate", among="brokers", targets=["leader"])
    lost = layout.add(start + shrink, Fault("power-loss", {"targets": ["leader"]}), same_as=cut)
    layout.add(start + shrink + 0.5, Fault("stop-partition"), heals=cut)
    return _leader_back(layout, lost, start, shrink)


def isr_shrink_followers_paused_leader_power_loss(layout: Layout, start: float) -> float:
    """The same ISR of one, the followers paused instead of cut off, then the leader's power
    lost; the followers resume 0.5 s later."""
    shrink = layout.draw(Span(1.2, 1.5, "lag"))
    paused = layout.add(start, Fault("pause", {"targets": ["followers"]}))
    lost = layout.add(start + shrink, Fault("power-loss", {"targets": ["leader"]}))
    layout.add(start + shrink + 0.5, Fault("resume"), heals=paused)
    return _leader_back(layout, lost, start, shrink)


def rack_power_loss(layout: Layout, start: float) -> float:
    """Every replica of the partition loses power at once (a rack, a zone) and comes back
    1.2-1.5 sessions later, once their ZooKeeper sessions have expired (so that they
    register and elect a controller at once, and the run is judged on what they did):
    whatever no replica had fsynced is gone everywhere."""
    lost = layout.add(start, Fault("power-loss", {"targets": ["isr"]}))
    end = start + layout.draw(Span(1.2, 1.5, "session"))
    layout.add(end, Fault("start"), heals=lost)
    return end


SCENARIOS: dict[str, Scenario] = {
    s.name: s
    for s in (
        Scenario(
            "zombie-leader",
            "a deposed leader still reached by clients",
            (
                Variant("cut-off", zombie_leader_cut_off, "partitions"),
                Variant("paused", zombie_leader_paused),
            ),
            reach.leader_deposed,
        ),
        Scenario(
            "isr-shrink-leader-loss",
            "an ISR of one, then the loss of that one",
            (
                Variant("cut-off", isr_shrink_leader_cut_off, "partitions"),
                Variant("followers-paused", isr_shrink_followers_paused),
            ),
            reach.isr_of_one_then_lost,
        ),
        Scenario(
            "follower-restart-leader-loss",
            "truncation on restart, then a failover before catching up (KIP-101)",
            (
                Variant("restart", follower_restart_leader_loss),
                Variant("rejoined", follower_restart_leader_loss_rejoined),
            ),
            reach.restarted_follower_elected,
            aim="apart-from-controller",
        ),
        Scenario(
            "failover-during-truncation",
            "a leader change while a replica truncates (KIP-101)",
            (
                Variant("cut-off", failover_during_truncation_cut_off, "partitions"),
                Variant("followers-paused", failover_during_truncation_paused),
            ),
            reach.truncation_during_failover,
        ),
        Scenario(
            "failover-chain",
            "a second leader change before the remaining follower fetched from the first",
            (Variant("one-way-cut", failover_chain, "partitions"),),
            reach.second_failover_to_the_stalled_follower,
            aim="apart-from-controller",
        ),
        Scenario(
            "controller-failover-during-election",
            "an election by a new controller with writes in flight",
            (Variant("kill", controller_failover_during_election),),
            reach.election_by_new_controller,
        ),
        Scenario(
            "leader-session-loss",
            "a leader fenced by ZooKeeper but not by its peers",
            (Variant("isolate-zk", leader_session_loss, ("partitions", "zookeeper")),),
            reach.leader_deposed,
            aim="apart-from-controller",
        ),
        Scenario(
            "controller-session-loss",
            "a controller fenced by ZooKeeper",
            (Variant("isolate-zk", controller_session_loss, ("partitions", "zookeeper")),),
            reach.new_controller,
        ),
        Scenario(
            "slow-follower-failover",
            "a leader change while a follower replicates slowly",
            (Variant("slowed", slow_follower_failover),),
            reach.leader_deposed,
            aim="idle-follower",
        ),
        Scenario(
            "coordinator-failover",
            "a group's coordinator lost while its members rebalance and commit",
            (
                Variant("killed", coordinator_killed, "members"),
                Variant("cut-off", zombie_leader_cut_off, ("members", "partitions")),
                Variant("paused", zombie_leader_paused, "members"),
            ),
            reach.coordinator_moved,
            aim="group-state",
        ),
        Scenario(
            "rolling-bounce",
            "every leader moved by clean restarts",
            (Variant("bounce", rolling_bounce),),
            reach.leadership_moved,
        ),
        Scenario(
            "minority-corruption",
            "a follower's damaged disk, then a leader change",
            (
                Variant("corrupt", minority_corruption_corrupt, "disks"),
                Variant("truncate", minority_corruption_truncate, "disks"),
            ),
            reach.damaged_then_leader_lost,
        ),
        Scenario(
            "follower-rollback",
            "a follower restored from an old backup, then a leader change",
            (Variant("rollback", follower_rollback, "disks"),),
            reach.damaged_then_leader_lost,
        ),
        Scenario(
            "leader-power-loss",
            "a leader's unsynced writes lost with its power",
            (Variant("power-loss", leader_power_loss, "lazy-disk"),),
            reach.leader_deposed,
        ),
        Scenario(
            "paused-followers-leader-power-loss",
            "a leader's power lost while its followers were paused (NATS)",
            (Variant("power-loss", paused_followers_leader_power_loss, "lazy-disk"),),
            reach.leader_deposed,
        ),
        Scenario(
            "isr-shrink-leader-power-loss",
            "an ISR of one, then the power of that one",
            (
                Variant("cut-off", isr_shrink_leader_power_loss, ("lazy-disk", "partitions")),
                Variant(
                    "followers-paused", isr_shrink_followers_paused_leader_power_loss, "lazy-disk"
                ),
            ),
            reach.isr_of_one_then_lost,
        ),
        Scenario(
            "rack-power-loss",
            "every replica's power lost at once",
            (Variant("power-loss", rack_power_loss, "lazy-disk"),),
            reach.reelected_after_outage,
        ),
    )
}

DISKS_FAMILY = "disks that lie"
DISK_SCENARIOS: tuple[str, ...] = (
    "minority-corruption",
    "follower-rollback",
    "leader-power-loss",
    "paused-followers-leader-power-loss",
    "isr-shrink-leader-power-loss",
    "rack-power-loss",
)
"""The storage scenarios, applied where the runtime can (the power losses need lazy disks):
the storage family of the default round, all but ``isr-shrink-leader-power-loss``, which is
the ISR-shrink family's turn wherever the runtime can cut power; the generator
``default-without-disks`` leaves them all out. The checkers tell the losses the flush policy
and ``min.insync.replicas`` allow from those they forbid."""

FamilyTurn = str | tuple[str, ...]
"""One scenario of a family, or several where a turn takes the first the runtime can apply."""

DEFAULT_FAMILIES: dict[str, tuple[FamilyTurn, ...]] = {
    DISKS_FAMILY: tuple(n for n in DISK_SCENARIOS if n != "isr-shrink-leader-power-loss"),
    "leader change with writes in flight": (
        "zombie-leader",
        "controller-failover-during-election",
        "leader-session-loss",
        "controller-session-loss",
        "rolling-bounce",
    ),
    "ISR shrink": (("isr-shrink-leader-power-loss", "isr-shrink-leader-loss"),),
    "truncation after failover": ("follower-restart-leader-loss", "failover-during-truncation"),
    "a slow follower through leader changes": ("slow-follower-failover", "failover-chain"),
    "a group's coordinator moved": ("coordinator-failover",),
}
"""The default generator's round: one scenario of each family of states where replication
bugs show, each family taking its scenarios in turn, so that a 120-second run reaches every
family, not only the ones with many scenarios. The ISR of one ends with its last member's
power where the runtime can cut it (a killed process keeps what it wrote; only a power loss
tests what ``min.insync.replicas`` promises), else with its process. The coordinator's family
needs the workload's consumers to be members of a group (the runtime's ``members``); without
them it sits out."""


def turn_scenarios(turn: FamilyTurn) -> tuple[str, ...]:
    """The scenarios of one turn of a family, the preferred first."""
    return (turn,) if isinstance(turn, str) else turn


DEFAULT_MIX = tuple(
    name for family in DEFAULT_FAMILIES.values() for turn in family for name in turn_scenarios(turn)
)
"""Every scenario the default generator may run, those the runtime can apply."""
