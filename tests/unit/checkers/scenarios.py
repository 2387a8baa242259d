"""Scenarios: small hand-written stretches of history, each on its own keys and processes.

Each scenario writes its operations and returns what must be found on each of its keys:
the anomaly types that make the history invalid (`anomalies`), and the losses that the
configuration allows (`expected`). Keys not listed must show nothing. A scenario's name
prefixes its keys.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from tests.unit.checkers.history_builder import HistoryBuilder


@dataclass
class Outcome:
    anomalies: dict[str, set[str]] = field(default_factory=dict)
    expected: dict[str, set[str]] = field(default_factory=dict)
    caused_by_loss: set[str] = field(default_factory=set)
    """Anomaly types (beyond the loss types) that become expected when the loss is allowed."""
    unexcused: set[str] = field(default_factory=set)
    """Keys whose anomalies stay anomalies even where the configuration allows losses."""


Scenario = Callable[[HistoryBuilder, str], Outcome]


def clean_log(b: HistoryBuilder, k: str) -> Outcome:
    """Sends, a fail, an info never read, polls of every completion type: nothing wrong."""
    p, q, r, s = b.process(), b.process(), b.process(), b.process()
    b.send1(p, k, f"{k}-0", 0)
    b.send1(p, k, f"{k}-1", 1)
    b.send1(p, k, f"{k}-x", None, result="fail")
    b.send1(p, k, f"{k}-2", 2)
    b.poll(q, {k: [(0, f"{k}-0"), (1, f"{k}-1")]})
    b.poll(q, {k: [(2, f"{k}-2")]})
    b.poll(q, {k: []})
    b.send1(r, k, f"{k}-lost-info", None, result="info")  # never read: may not have happened
    b.poll(s, {k: [(0, f"{k}-0")]}, result="fail")
    return Outcome()


def inconsistent_offsets(b: HistoryBuilder, k: str) -> Outcome:
    """An info poll saw another value at an offset an ok poll and the send agree on."""
    p, q, r = b.process(), b.process(), b.process()
    b.send1(p, k, f"{k}-0", 0)
    b.poll(q, {k: [(0, f"{k}-0")]})
    b.poll(r, {k: [(0, f"{k}-other")]}, result="info")
    return Outcome({k: {"inconsistent-offsets"}})


def overwritten_write(b: HistoryBuilder, k: str) -> Outcome:
    """Two ok sends acknowledged at the same offset; only one survives."""
    p, q, r = b.process(), b.process(), b.process()
    b.send1(p, k, f"{k}-0", 0)
    b.send1(q, k, f"{k}-1", 0)
    b.poll(r, {k: [(0, f"{k}-1")]})
    return Outcome({k: {"inconsistent-offsets", "lost-write", "unseen"}})


def duplicate(b: HistoryBuilder, k: str) -> Outcome:
    """One value at two offsets (a retried produce)."""
    p, q = b.process(), b.process()
    b.send1(p, k, f"{k}-0", 0)
    b.poll(q, {k: [(0, f"{k}-0"), (1, f"{k}-0")]})
    return Outcome({k: {"duplicate"}})


def aborted_read(b: HistoryBuilder, k: str) -> Outcome:
    """A failed send's value read by an ok poll: G1a. Another failed send never read is fine."""
    p, q = b.process(), b.process()
    b.send1(p, k, f"{k}-0", None, result="fail")
    b.send1(p, k, f"{k}-1", None, result="fail")
    b.poll(q, {k: [(0, f"{k}-0")]})
    return Outcome({k: {"G1a"}})


def info_read_is_committed(b: HistoryBuilder, k: str) -> Outcome:
    """An info send read later is committed: neither G1a nor lost; an unread ok one is lost."""
    p, q, r = b.process(), b.process(), b.process()
    b.send1(p, k, f"{k}-0", None, result="info")
    b.send1(q, k, f"{k}-1", 1)
    b.poll(r, {k: [(0, f"{k}-0"), (1, f"{k}-1")]})
    return Outcome()


def lost_write(b: HistoryBuilder, k: str) -> Outcome:
    """An ok write below what a reader reached, never read."""
    p, q = b.process(), b.process()
    b.send1(p, k, f"{k}-0", 0)
    b.send1(p, k, f"{k}-1", 1)
    b.poll(q, {k: [(1, f"{k}-1")]})
    return Outcome({k: {"lost-write", "unseen"}})


def unseen_tail(b: HistoryBuilder, k: str) -> Outcome:
    """An ok write beyond what any reader reached: unseen, not lost."""
    p, q = b.process(), b.process()
    b.send1(p, k, f"{k}-0", 0)
    b.send1(p, k, f"{k}-1", 1)
    b.poll(q, {k: [(0, f"{k}-0")]})
    return Outcome({k: {"unseen"}})


def info_write_committed_by_sibling(b: HistoryBuilder, k: str) -> Outcome:
    """An info op's other value was read, so it committed; its unread value seen at offset 1
    by an info poll lies below an ok read's reach: lost-write (info, so not unseen)."""
    p, q, r, s, t = (b.process() for _ in range(5))
    b.send(p, [(k, f"{k}-0", None), (k, f"{k}-1", None)], result="info")
    b.send1(q, k, f"{k}-2", 2)
    b.poll(r, {k: [(0, f"{k}-0")]})
    b.poll(s, {k: [(1, f"{k}-1")]}, result="info")
    b.poll(t, {k: [(2, f"{k}-2")]})
    return Outcome({k: {"lost-write"}})


def info_write_committed_in_another_key(b: HistoryBuilder, k: str) -> Outcome:
    """The same, but the info op's value that was read went to another key: it committed all
    the same."""
    other = f"{k}-other"
    p, q, r, s, t = (b.process() for _ in range(5))
    b.send(p, [(other, f"{other}-0", None), (k, f"{k}-1", None)], result="info")
    b.send1(q, k, f"{k}-2", 2)
    b.poll(r, {other: [(0, f"{other}-0")]})
    b.poll(s, {k: [(1, f"{k}-1")]}, result="info")
    b.poll(t, {k: [(2, f"{k}-2")]})
    return Outcome({k: {"lost-write"}})


def info_write_uncommitted(b: HistoryBuilder, k: str) -> Outcome:
    """The same, but no value of the info op was read by an ok op: it may not have happened."""
    p, q, s, t = (b.process() for _ in range(4))
    b.send1(p, k, f"{k}-1", None, result="info")
    b.send1(q, k, f"{k}-2", 2)
    b.poll(s, {k: [(1, f"{k}-1")]}, result="info")
    b.poll(t, {k: [(2, f"{k}-2")]})
    return Outcome()


def _log(b: HistoryBuilder, k: str, n: int, p: int | None = None) -> list[str]:
    """n ok sends at offsets 0..n-1 by process p (a fresh one by default); the values."""
    p = b.process() if p is None else p
    values = [f"{k}-{i}" for i in range(n)]
    for offset, value in enumerate(values):
        b.send1(p, k, value, offset)
    return values


def _read_all(b: HistoryBuilder, k: str, values: list[str]) -> None:
    b.poll(b.process(), {k: list(enumerate(values))})


def poll_skip(b: HistoryBuilder, k: str) -> Outcome:
    v = _log(b, k, 4)
    _read_all(b, k, v)
    p = b.process()
    b.poll(p, {k: [(0, v[0])]})
    b.poll(p, {k: [(2, v[2]), (3, v[3])]})
    return Outcome({k: {"poll-skip"}})


def poll_skip_reset_by_assign(b: HistoryBuilder, k: str) -> Outcome:
    """An assign that dropped the key in between resets the pairing; one that keeps it does
    not matter; a hole in the offsets is not a skip."""
    p = b.process()
    b.send1(p, k, f"{k}-0", 0)
    b.send1(p, k, f"{k}-1", 1)
    b.send1(p, k, f"{k}-3", 3)
    b.send1(p, k, f"{k}-4", 4)
    _read_all(b, k, [f"{k}-0", f"{k}-1"])
    b.poll(b.process(), {k: [(3, f"{k}-3"), (4, f"{k}-4")]})
    q = b.process()
    b.assign(q, [k])
    b.poll(q, {k: [(0, f"{k}-0")]})
    b.assign(q, [k, f"{k}-other"])
    b.poll(q, {k: [(1, f"{k}-1")]})
    b.poll(q, {k: [(3, f"{k}-3")]})
    b.assign(q, [f"{k}-other"])
    b.assign(q, [k])
    b.poll(q, {k: [(0, f"{k}-0")]})
    return Outcome()


def nonmonotonic_poll(b: HistoryBuilder, k: str) -> Outcome:
    v = _log(b, k, 3)
    p = b.process()
    b.poll(p, {k: [(0, v[0]), (1, v[1])]})
    b.poll(p, {k: [(1, v[1]), (2, v[2])]})
    return Outcome({k: {"nonmonotonic-poll"}})


def nonmonotonic_poll_after_failed_poll(b: HistoryBuilder, k: str) -> Outcome:
    """A failed poll does not move the position: the next ok poll continues after the last ok."""
    v = _log(b, k, 3)
    p = b.process()
    b.poll(p, {k: [(0, v[0])]})
    b.poll(p, {k: [(1, v[1])]}, result="fail")
    b.poll(p, {k: [(1, v[1]), (2, v[2])]})
    return Outcome()


def int_poll_skip(b: HistoryBuilder, k: str) -> Outcome:
    v = _log(b, k, 3)
    _read_all(b, k, v)
    b.poll(b.process(), {k: [(0, v[0]), (2, v[2])]})
    return Outcome({k: {"int-poll-skip"}})


def int_poll_skip_across_micro_ops(b: HistoryBuilder, k: str) -> Outcome:
    """Consecutive reads in two poll micro-ops of one txn-like poll operation."""
    v = _log(b, k, 3)
    _read_all(b, k, v)
    b.poll(b.process(), [{k: [(0, v[0])]}, {k: [(2, v[2])]}])
    return Outcome({k: {"int-poll-skip"}})


def int_nonmonotonic_poll(b: HistoryBuilder, k: str) -> Outcome:
    v = _log(b, k, 2)
    b.poll(b.process(), {k: [(0, v[0]), (1, v[1]), (0, v[0])]})
    return Outcome({k: {"int-nonmonotonic-poll"}})


def nonmonotonic_send(b: HistoryBuilder, k: str) -> Outcome:
    p = b.process()
    b.send1(p, k, f"{k}-a", 1)
    b.send1(p, k, f"{k}-b", 0)
    _read_all(b, k, [f"{k}-b", f"{k}-a"])
    return Outcome({k: {"nonmonotonic-send"}})


def monotonic_sends_with_gap(b: HistoryBuilder, k: str) -> Outcome:
    """Another producer's write between two sends of a process is fine."""
    p, q = b.process(), b.process()
    b.send1(p, k, f"{k}-0", 0)
    b.send1(q, k, f"{k}-1", 1)
    b.send1(p, k, f"{k}-2", 2)
    _read_all(b, k, [f"{k}-0", f"{k}-1", f"{k}-2"])
    return Outcome()


def int_send_skip(b: HistoryBuilder, k: str) -> Outcome:
    """Allowed: another producer wrote between two sends of one operation."""
    p, q = b.process(), b.process()
    b.send(p, [(k, f"{k}-0", 0), (k, f"{k}-2", 2)])
    b.send1(q, k, f"{k}-1", 1)
    _read_all(b, k, [f"{k}-0", f"{k}-1", f"{k}-2"])
    return Outcome({k: {"int-send-skip"}})


def int_nonmonotonic_send(b: HistoryBuilder, k: str) -> Outcome:
    p = b.process()
    b.send(p, [(k, f"{k}-0", 1), (k, f"{k}-1", 0)])
    _read_all(b, k, [f"{k}-1", f"{k}-0"])
    return Outcome({k: {"int-nonmonotonic-send"}})


def at_least_once_violation(b: HistoryBuilder, k: str) -> Outcome:
    """A group member commits past a value it never consumed (others read it)."""
    v = _log(b, k, 3)
    _read_all(b, k, v)
    member = b.process()
    b.subscribe(member, [k])
    b.poll(member, {k: [(0, v[0])]})
    b.commit(member, {k: 2})
    return Outcome({k: {"at-least-once-violation"}})


def group_consumes_everything(b: HistoryBuilder, k: str) -> Outcome:
    """Members consume every value before committing past it; one value twice (allowed:
    the second member started before the first committed)."""
    v = _log(b, k, 3)
    first, second = b.process(), b.process()
    b.subscribe(first, [k])
    b.subscribe(second, [k])
    b.poll(first, {k: [(0, v[0]), (1, v[1])]})
    b.commit(first, {k: 2})
    b.poll(second, {k: [(1, v[1]), (2, v[2])]})
    b.commit(second, {k: 3})
    return Outcome()


def group_member_after_an_info(b: HistoryBuilder, k: str) -> Outcome:
    """A member's client goes on under a new process after an `info` commit, with no
    subscribe of its own: what it reads the group consumed, so a commit past it is fine."""
    v = _log(b, k, 2)
    first = b.process()
    b.subscribe(first, [k])
    b.poll(first, {k: [(0, v[0])]})
    b.commit(first, {k: 1}, result="info")
    later = b.process()  # the same client, retired after the info
    b.poll(later, {k: [(1, v[1])]})
    b.commit(later, {k: 2}, result="info")
    other = b.process()
    b.subscribe(other, [k])
    b.commit(other, {k: 2})
    return Outcome()


def unclean_election_loss(b: HistoryBuilder, k: str) -> Outcome:
    """Acked writes past what followers had are lost when an out-of-sync replica leads."""
    v = _log(b, k, 4)
    b.poll(b.process(), {k: [(0, v[0]), (1, v[1])]})
    b.election(k, unclean=True)
    p = b.process()
    b.send1(p, k, f"{k}-new-2", 2)
    b.send1(p, k, f"{k}-new-3", 3)
    b.poll(b.process(), {k: [(0, v[0]), (1, v[1]), (2, f"{k}-new-2"), (3, f"{k}-new-3")]})
    return Outcome({k: {"unclean-loss-window", "lost-write", "unseen", "inconsistent-offsets"}})


def unclean_truncation_steps_back(b: HistoryBuilder, k: str) -> Outcome:
    """After an unclean election truncated the log, the producer's next send lands before
    its previous one and a consumer reset to the earliest offset re-reads from 0: steps
    back that the lost positions explain (expected where the loss is)."""
    p, c = b.process(), b.process()
    v = _log(b, k, 4, p)
    b.poll(c, {k: [(0, v[0]), (1, v[1]), (2, v[2]), (3, v[3])]})
    b.election(k, unclean=True)
    b.send1(p, k, f"{k}-new-2", 2)
    b.send1(p, k, f"{k}-new-3", 3)
    b.poll(c, {k: [(0, v[0]), (1, v[1]), (2, f"{k}-new-2"), (3, f"{k}-new-3")]})
    return Outcome(
        {
            k: {
                "unclean-loss-window",
                "inconsistent-offsets",
                "nonmonotonic-send",
                "nonmonotonic-poll",
            }
        },
        caused_by_loss={"nonmonotonic-send", "nonmonotonic-poll"},
    )


def unclean_shortened_log(b: HistoryBuilder, k: str) -> Outcome:
    """The log after an unclean election is shorter than where a consumer was: it resets
    to the earliest offset (a step back across the election, expected where allowed)."""
    p, c = b.process(), b.process()
    v = _log(b, k, 4, p)
    b.poll(c, {k: [(0, v[0]), (1, v[1]), (2, v[2]), (3, v[3])]})
    b.election(k, unclean=True)
    b.send1(b.process(), k, f"{k}-new-2", 2)
    b.poll(c, {k: [(0, v[0]), (1, v[1]), (2, f"{k}-new-2")]})
    return Outcome(
        {k: {"unclean-loss-window", "inconsistent-offsets", "nonmonotonic-poll"}},
        caused_by_loss={"nonmonotonic-poll"},
    )


def commit_before_truncation(b: HistoryBuilder, k: str) -> Outcome:
    """The group committed past offset 2 before an unclean election; the value written at
    offset 2 afterwards is not covered by that commit (no at-least-once violation)."""
    p, c, r = b.process(), b.process(), b.process()
    v = _log(b, k, 4, p)
    b.subscribe(c, [k])
    b.poll(c, {k: [(0, v[0]), (1, v[1]), (2, v[2]), (3, v[3])]})
    b.commit(c, {k: 4})
    b.election(k, unclean=True)
    b.send1(b.process(), k, f"{k}-new-2", 2)
    b.poll(r, {k: [(0, v[0]), (1, v[1]), (2, f"{k}-new-2")]})
    return Outcome({k: {"unclean-loss-window", "inconsistent-offsets"}})


def deposed_leader_acks(b: HistoryBuilder, k: str) -> Outcome:
    """After an unclean election, the deposed leader (1) acknowledges a write before it
    rejoins the new leader's ISR: that write is lost in the election's window too. A write
    acknowledged after the rejoin and lost is not the election's (lost-write, unseen)."""
    p, q, r = b.process(), b.process(), b.process()
    b.send1(p, k, f"{k}-0", 0)
    b.send1(p, k, f"{k}-1", 1)
    b.election(k, unclean=True)
    b.send1(q, k, f"{k}-deposed", 2)
    b.send1(r, k, f"{k}-new-1", 1)
    b.send1(r, k, f"{k}-new-2", 2)
    b.isr_change(k, [2, 1])
    b.poll(b.process(), {k: [(0, f"{k}-0"), (1, f"{k}-new-1"), (2, f"{k}-new-2")]})
    late = f"{k}-late"
    b.send1(p, late, f"{late}-0", 0)
    b.election(late, unclean=True)
    b.isr_change(late, [2, 1])
    b.send1(q, late, f"{late}-after-rejoin", 1)
    b.send1(r, late, f"{late}-new-1", 1)
    b.poll(b.process(), {late: [(0, f"{late}-0"), (1, f"{late}-new-1")]})
    return Outcome(
        {
            k: {"unclean-loss-window", "inconsistent-offsets", "lost-write", "unseen"},
            late: {"inconsistent-offsets", "lost-write", "unseen"},
        },
        unexcused={late},
    )


def deposed_leader_read(b: HistoryBuilder, k: str) -> Outcome:
    """A write acknowledged before an unclean election is read after it from the deposed
    leader, before that leader rejoins the new leader's ISR; reads after the rejoin pass
    its offset without it: lost in the election's window."""
    p, c = b.process(), b.process()
    b.send1(p, k, f"{k}-0", 0)
    b.send1(p, k, f"{k}-1", 1)
    b.poll(c, {k: [(0, f"{k}-0")]})
    b.election(k, unclean=True)
    b.poll(c, {k: [(1, f"{k}-1")]})
    r = b.process()
    b.send1(r, k, f"{k}-new-1", 1)
    b.send1(r, k, f"{k}-new-2", 2)
    b.isr_change(k, [2, 1])
    b.poll(b.process(), {k: [(0, f"{k}-0"), (1, f"{k}-new-1"), (2, f"{k}-new-2")]})
    return Outcome({k: {"unclean-loss-window", "inconsistent-offsets"}})


def unclean_log_ends_below(b: HistoryBuilder, k: str) -> Outcome:
    """Writes acknowledged before an unclean election past the end of the new leader's log:
    no read can pass them, but the final read, which reads the key to its end, ends below
    them: lost in the election's window."""
    p, c = b.process(), b.process()
    v = _log(b, k, 4, p)
    b.poll(c, {k: [(0, v[0]), (1, v[1])]})
    b.election(k, unclean=True)
    b.send1(b.process(), k, f"{k}-new-2", 2)
    final = b.process()
    b.assign(final, [k])
    b.poll(final, {k: [(0, v[0]), (1, v[1]), (2, f"{k}-new-2")]}, final=True)
    return Outcome({k: {"unclean-loss-window", "lost-write", "unseen", "inconsistent-offsets"}})


def deposed_leader_info_read(b: HistoryBuilder, k: str) -> Outcome:
    """After an unclean election the deposed leader takes a write whose send times out
    (info) and a consumer reads it there; once the deposed leader rejoins the new leader's
    ISR, that offset holds the new leader's value and the consumer, reset to the earliest
    offset, steps back across it: lost in the election's window, the step back explained."""
    p, c = b.process(), b.process()
    b.send1(p, k, f"{k}-0", 0)
    b.send1(p, k, f"{k}-1", 1)
    b.poll(c, {k: [(0, f"{k}-0"), (1, f"{k}-1")]})
    b.election(k, unclean=True)
    b.send1(b.process(), k, f"{k}-deposed", None, result="info")
    b.poll(c, {k: [(2, f"{k}-deposed")]})
    b.send1(b.process(), k, f"{k}-new-2", 2)
    b.isr_change(k, [2, 1])
    b.poll(c, {k: [(0, f"{k}-0"), (1, f"{k}-1"), (2, f"{k}-new-2")]})
    return Outcome(
        {k: {"unclean-loss-window", "inconsistent-offsets", "nonmonotonic-poll"}},
        caused_by_loss={"nonmonotonic-poll"},
    )


def elections_without_loss(b: HistoryBuilder, k: str) -> Outcome:
    """A clean election, and an unclean one after which everything acknowledged is still read."""
    v = _log(b, k, 2)
    b.election(k, unclean=False)
    b.election(k, unclean=True, epoch=2)
    _read_all(b, k, v)
    return Outcome()


def acks1_loss(b: HistoryBuilder, k: str) -> Outcome:
    """Sends that say acks=1 may be lost: expected, not invalid."""
    p, q = b.process(), b.process()
    b.send1(p, k, f"{k}-0", 0, acks=1)
    b.send1(p, k, f"{k}-1", 1, acks=1)
    b.poll(q, {k: [(1, f"{k}-1")]})
    return Outcome(expected={k: {"lost-write", "unseen"}})


def acks1_truncation_steps_back(b: HistoryBuilder, k: str) -> Outcome:
    """An acks=1 write lost with its leader: the offset is reused, so the producer's next
    send lands on it (nonmonotonic-send, explained by the loss)."""
    p, c = b.process(), b.process()
    b.send1(p, k, f"{k}-0", 0)
    b.send1(p, k, f"{k}-1", 1)
    b.election(k, unclean=False)
    b.send1(p, k, f"{k}-2", 1)
    b.poll(c, {k: [(0, f"{k}-0"), (1, f"{k}-2")]})
    return Outcome(
        {k: {"lost-write", "unseen", "inconsistent-offsets", "nonmonotonic-send"}},
        caused_by_loss={"nonmonotonic-send"},
    )


DEFAULT_SCENARIOS: dict[str, Scenario] = {
    "clean": clean_log,
    "groupinfo": group_member_after_an_info,
    "incons": inconsistent_offsets,
    "overwrite": overwritten_write,
    "dup": duplicate,
    "g1a": aborted_read,
    "inforead": info_read_is_committed,
    "lost": lost_write,
    "unseen": unseen_tail,
    "infosib": info_write_committed_by_sibling,
    "infospread": info_write_committed_in_another_key,
    "infouncommitted": info_write_uncommitted,
    "pskip": poll_skip,
    "preset": poll_skip_reset_by_assign,
    "pnonmono": nonmonotonic_poll,
    "pfail": nonmonotonic_poll_after_failed_poll,
    "ipskip": int_poll_skip,
    "ipskipmops": int_poll_skip_across_micro_ops,
    "ipnonmono": int_nonmonotonic_poll,
    "snonmono": nonmonotonic_send,
    "sgap": monotonic_sends_with_gap,
    "isskip": int_send_skip,
    "isnonmono": int_nonmonotonic_send,
    "alo": at_least_once_violation,
    "group": group_consumes_everything,
    "unclean": unclean_election_loss,
    "truncated": unclean_truncation_steps_back,
    "shortened": unclean_shortened_log,
    "recommitted": commit_before_truncation,
    "deposed": deposed_leader_acks,
    "deposedread": deposed_leader_read,
    "deposedinfo": deposed_leader_info_read,
    "logend": unclean_log_ends_below,
    "elections": elections_without_loss,
    "acks1": acks1_loss,
}


def lost_acked_write(b: HistoryBuilder, k: str) -> Outcome:
    """The complete final read misses an acknowledged acks=-1 write (test.json promised)."""
    v = _log(b, k, 3)
    final = b.process()
    b.assign(final, [k])
    b.poll(final, {k: [(0, v[0]), (2, v[2])]}, final=True)
    return Outcome({k: {"lost-acked-write", "lost-write", "unseen", "int-poll-skip"}})


def complete_final_read(b: HistoryBuilder, k: str) -> Outcome:
    """A final read in two polls of one process that covers everything."""
    v = _log(b, k, 3)
    final = b.process()
    b.assign(final, [k])
    b.poll(final, {k: [(0, v[0]), (1, v[1])]}, final=True)
    b.poll(final, {k: [(2, v[2])]}, final=True)
    return Outcome()


def incomplete_final_read(b: HistoryBuilder, k: str) -> Outcome:
    """A final read that stopped before the highest acknowledged offset judges nothing."""
    v = _log(b, k, 3)
    final = b.process()
    b.assign(final, [k])
    b.poll(final, {k: [(0, v[0]), (1, v[1])]}, final=True)
    return Outcome({k: {"unseen"}})


def acks1_missing_from_final_read(b: HistoryBuilder, k: str) -> Outcome:
    """An acks=1 write missing from a complete final read is an expected loss, not a
    lost-acked-write, even where test.json promised no loss of acks=-1 writes."""
    p = b.process()
    b.send1(p, k, f"{k}-0", 0)
    b.send1(p, k, f"{k}-1", 1, acks=1)
    b.send1(p, k, f"{k}-2", 2)
    final = b.process()
    b.assign(final, [k])
    b.poll(final, {k: [(0, f"{k}-0")]}, final=True)
    b.poll(final, {k: [(2, f"{k}-2")]}, final=True)
    return Outcome({k: {"poll-skip"}}, expected={k: {"lost-write", "unseen"}})


def lost_tail(b: HistoryBuilder, k: str) -> Outcome:
    """The log ends (as the final read recorded it) below two acknowledged writes, and the
    final read read it to that end: a complete final read, the two are lost-acked-writes
    (placed in the tail); not lost-writes, as no read reached their offsets."""
    v = _log(b, k, 4)
    final = b.process()
    b.assign(final, [k])
    b.poll(final, {k: [(0, v[0]), (1, v[1])]}, final=True)
    b.log_ends(final, {k: 3}, result="fail")
    b.log_ends(final, {k: 2})
    return Outcome({k: {"lost-acked-write", "unseen"}})


def read_short_of_log_end(b: HistoryBuilder, k: str) -> Outcome:
    """The final read stopped short of the log end it recorded: not complete."""
    v = _log(b, k, 4)
    final = b.process()
    b.assign(final, [k])
    b.poll(final, {k: [(0, v[0])]}, final=True)
    b.log_ends(final, {k: 3})
    return Outcome({k: {"unseen"}})


def log_grew_past_recorded_end(b: HistoryBuilder, k: str) -> Outcome:
    """The final read read past the log end it recorded last (the log grew after it): that
    end is not the log's, the read is not complete."""
    v = _log(b, k, 4)
    final = b.process()
    b.assign(final, [k])
    b.poll(final, {k: [(0, v[0]), (1, v[1])]}, final=True)
    b.log_ends(final, {k: 2})
    b.poll(final, {k: [(2, v[2])]}, final=True)
    return Outcome({k: {"unseen"}})


def whole_log_lost(b: HistoryBuilder, k: str) -> Outcome:
    """The log ended at offset 0: the final read had nothing to read, and the key's
    acknowledged writes are all lost-acked-writes."""
    _log(b, k, 2)
    final = b.process()
    b.assign(final, [k])
    b.poll(final, {}, final=True)
    b.log_ends(final, {k: 0})
    return Outcome({k: {"lost-acked-write", "unseen"}})


PROMISE_SCENARIOS: dict[str, Scenario] = {
    "lostacked": lost_acked_write,
    "finalok": complete_final_read,
    "finalpartial": incomplete_final_read,
    "finalacks1": acks1_missing_from_final_read,
    "clean": clean_log,
    "losttail": lost_tail,
    "shortofend": read_short_of_log_end,
    "grewpastend": log_grew_past_recorded_end,
    "wholelog": whole_log_lost,
}

ACKS1_SCENARIOS: dict[str, Scenario] = {
    "lost": lost_write,
    "truncated": acks1_truncation_steps_back,
    "unseen": unseen_tail,
    "clean": clean_log,
}

UNCLEAN_SCENARIOS: dict[str, Scenario] = {
    "unclean": unclean_election_loss,
    "truncated": unclean_truncation_steps_back,
    "shortened": unclean_shortened_log,
    "recommitted": commit_before_truncation,
    "elections": elections_without_loss,
    "deposed": deposed_leader_acks,
    "deposedread": deposed_leader_read,
    "deposedinfo": deposed_leader_info_read,
    "logend": unclean_log_ends_below,
}


def build(builder: HistoryBuilder, scenarios: dict[str, Scenario]) -> dict[str, Outcome]:
    """Write every scenario (key = its name) and return their outcomes by name."""
    return {name: scenario(builder, name) for name, scenario in scenarios.items()}
