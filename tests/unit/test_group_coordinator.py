"""The group coordinator's state machine, driven by hand through time: joins, the leader's
assignment, sessions that expire, rebalance timeouts, and which commits it takes."""

from __future__ import annotations

import itertools
from collections.abc import Sequence

import pytest

from system_under_test.errors import ErrorCode
from system_under_test.group_coordinator import (
    Assigned,
    GroupCoordinator,
    GroupLimits,
    GroupState,
    JoinRequest,
    JoinResult,
    Pending,
    Rebalanced,
)

G = "workers"
RANGE = (("range", b"meta-range"),)


class Cluster:
    """A coordinator, a clock and what its listener heard."""

    def __init__(self, *, delay_s: float = 0.0, require_ids: bool = False) -> None:
        counter = itertools.count(1)
        self.heard: list[Rebalanced | Assigned] = []
        self.coordinator = GroupCoordinator(
            GroupLimits(min_session_timeout_s=1.0, initial_rebalance_delay_s=delay_s),
            listener=self.heard.append,
            new_member_id=lambda client: f"{client}-{next(counter)}",
        )
        self.now = 0.0
        self.require_ids = require_ids

    def join(
        self,
        member_id: str = "",
        *,
        client: str = "c",
        protocols: Sequence[tuple[str, bytes]] = RANGE,
        session_s: float = 10.0,
        rebalance_s: float = 30.0,
        protocol_type: str = "consumer",
    ) -> Pending[JoinResult]:
        request = JoinRequest(
            client, "/10.0.0.1", session_s, rebalance_s, protocol_type, tuple(protocols)
        )
        return self.coordinator.join(
            G, member_id, request, now=self.now, require_known_member_id=self.require_ids
        )

    def at(self, now: float) -> None:
        self.now = now
        self.coordinator.expire(now)

    @property
    def state(self) -> GroupState:
        group = self.coordinator.group(G)
        assert group is not None
        return group.state


def stable_group(cluster: Cluster, clients: Sequence[str]) -> list[JoinResult]:
    """The first client joins alone (generation 1), the others join and it joins again
    (generation 2), and the leader assigns."""
    first = cluster.join(client=clients[0]).result()
    others = [cluster.join(client=c) for c in clients[1:]]
    results = [cluster.join(first.member_id).result(), *(j.result() for j in others)]
    leader = results[0].leader_id
    syncs = [
        cluster.coordinator.sync(
            G,
            r.generation_id,
            r.member_id,
            {m: f"for {m}".encode() for m, _ in results[0].members}
            if r.member_id == leader
            else {},
            now=cluster.now,
        )
        for r in results
    ]
    assert all(s.result().error is ErrorCode.NONE for s in syncs)
    assert cluster.state is GroupState.STABLE
    return results


def test_members_join_one_generation_and_only_the_leader_assigns() -> None:
    cluster = Cluster()
    first = cluster.join(client="a")
    assert first.done  # no initial delay: a group of one completes at once
    assert cluster.state is GroupState.COMPLETING_REBALANCE
    a = first.result()
    assert (a.generation_id, a.leader_id, a.protocol_name) == (1, a.member_id, "range")
    assert a.members == ((a.member_id, b"meta-range"),)

    b_join = cluster.join(client="b")  # a second member: a new rebalance waits for a
    assert not b_join.done and cluster.state is GroupState.PREPARING_REBALANCE
    assert (
        cluster.coordinator.heartbeat(G, 1, a.member_id, now=0.1) is ErrorCode.REBALANCE_IN_PROGRESS
    )
    a_again = cluster.join(a.member_id)
    a2, b = a_again.result(), b_join.result()
    assert a2.generation_id == b.generation_id == 2 and a2.leader_id == a.member_id
    assert [m for m, _ in a2.members] == [a.member_id, b.member_id] and b.members == ()

    b_sync = cluster.coordinator.sync(G, 2, b.member_id, {}, now=0.2)
    assert not b_sync.done  # a follower waits for the leader's assignment
    a_sync = cluster.coordinator.sync(
        G, 2, a.member_id, {a.member_id: b"p0", b.member_id: b"p1"}, now=0.2
    )
    assert (a_sync.result().assignment, b_sync.result().assignment) == (b"p0", b"p1")
    assert cluster.state is GroupState.STABLE
    assert cluster.heard[-1] == Assigned(G, 2, {a.member_id: b"p0", b.member_id: b"p1"})
    assert [h.generation_id for h in cluster.heard if isinstance(h, Rebalanced)] == [1, 2]


def test_the_first_rebalance_waits_the_initial_delay_for_more_members() -> None:
    cluster = Cluster(delay_s=3.0)
    a = cluster.join(client="a")
    cluster.at(2.0)
    b = cluster.join(client="b")  # extends the delay to 5.0
    cluster.at(4.0)
    assert not a.done and not b.done
    cluster.at(5.0)
    assert a.result().generation_id == b.result().generation_id == 1
    assert len(a.result().members) == 2


def test_a_member_whose_session_passes_is_removed_and_the_rest_rebalance() -> None:
    cluster = Cluster()
    a, b = stable_group(cluster, ["a", "b"])
    cluster.at(5.0)
    assert cluster.coordinator.heartbeat(G, 1 + 1, a.member_id, now=5.0) is ErrorCode.NONE
    cluster.at(10.5)  # b was last heard of at 0: its 10 s session has passed
    group = cluster.coordinator.group(G)
    assert group is not None and list(group.members) == [a.member_id]
    assert cluster.state is GroupState.PREPARING_REBALANCE
    assert cluster.coordinator.heartbeat(G, 2, a.member_id, now=10.6) is (
        ErrorCode.REBALANCE_IN_PROGRESS
    )
    assert cluster.join(a.member_id).result().generation_id == 3
    cluster.coordinator.sync(G, 3, a.member_id, {a.member_id: b"all"}, now=10.6)
    # b comes back (a zombie: paused past its session): it is no member any more
    assert cluster.coordinator.heartbeat(G, 2, b.member_id, now=11.0) is ErrorCode.UNKNOWN_MEMBER_ID
    assert cluster.coordinator.check_commit(G, 2, b.member_id) is ErrorCode.UNKNOWN_MEMBER_ID


def test_members_that_do_not_join_within_the_rebalance_timeout_are_removed() -> None:
    cluster = Cluster()
    a, b = stable_group(cluster, ["a", "b"])
    c = cluster.join(client="c", rebalance_s=20.0)
    cluster.at(1.0)
    a_again = cluster.join(a.member_id)  # b keeps heartbeating but never joins
    for t in (5.0, 10.0, 15.0, 20.0, 25.0):
        assert cluster.coordinator.heartbeat(G, 2, b.member_id, now=t) in (
            ErrorCode.REBALANCE_IN_PROGRESS,
        )
        cluster.at(t)
        assert not a_again.done
    cluster.at(30.0)  # the longest rebalance timeout (30 s) since the rebalance began at 0
    assert a_again.result().generation_id == c.result().generation_id == 3
    assert [m for m, _ in a_again.result().members] == [a.member_id, c.result().member_id]


def test_commits_are_taken_only_from_the_current_generation() -> None:
    cluster = Cluster()
    check = cluster.coordinator.check_commit
    assert check("nobody", -1, "") is ErrorCode.NONE  # a consumer that assigns by hand
    assert check("nobody", 3, "x") is ErrorCode.ILLEGAL_GENERATION
    a, b = stable_group(cluster, ["a", "b"])
    assert check(G, a.generation_id, a.member_id) is ErrorCode.NONE
    assert check(G, a.generation_id - 1, a.member_id) is ErrorCode.ILLEGAL_GENERATION
    assert check(G, -1, "") is ErrorCode.UNKNOWN_MEMBER_ID  # the group has members
    cluster.join(client="c")
    assert check(G, a.generation_id, a.member_id) is ErrorCode.NONE  # preparing: still its own
    cluster.join(a.member_id)
    cluster.join(b.member_id)
    assert cluster.state is GroupState.COMPLETING_REBALANCE
    assert check(G, a.generation_id + 1, a.member_id) is ErrorCode.REBALANCE_IN_PROGRESS


def test_new_members_of_join_group_v4_are_given_their_id_first() -> None:
    cluster = Cluster(require_ids=True)
    first = cluster.join(client="a").result()
    assert first.error is ErrorCode.MEMBER_ID_REQUIRED and first.member_id == "a-1"
    joined = cluster.join(first.member_id, client="a").result()
    assert (joined.error, joined.member_id, joined.generation_id) == (ErrorCode.NONE, "a-1", 1)
    assert cluster.join("a-99").result().error is ErrorCode.UNKNOWN_MEMBER_ID


def test_joins_that_cannot_be_taken() -> None:
    cluster = Cluster()
    assert cluster.join(session_s=0.5).result().error is ErrorCode.INVALID_SESSION_TIMEOUT
    cluster.join(client="a")
    other = cluster.join(client="b", protocols=(("roundrobin", b""),)).result()
    assert other.error is ErrorCode.INCONSISTENT_GROUP_PROTOCOL
    assert cluster.join(protocol_type="connect").result().error is (
        ErrorCode.INCONSISTENT_GROUP_PROTOCOL
    )
    request = JoinRequest("c", "h", 10, 10, "consumer", RANGE)
    nameless = cluster.coordinator.join("", "", request, now=0)
    assert nameless.result().error is ErrorCode.INVALID_GROUP_ID


def test_the_protocol_most_members_prefer_among_those_all_support() -> None:
    cluster = Cluster()
    both = (("roundrobin", b"rr"), ("range", b"r"))
    a = cluster.join(client="a", protocols=both)
    a_again = cluster.join(a.result().member_id, protocols=both)
    b = cluster.join(client="b", protocols=(("range", b"r"), ("roundrobin", b"rr")))
    c = cluster.join(client="c", protocols=both)
    a_again = cluster.join(a.result().member_id, protocols=both)
    assert b.result().protocol_name == c.result().protocol_name == "roundrobin"
    assert dict(a_again.result().members)[b.result().member_id] == b"rr"


def test_leaving_rebalances_and_the_last_to_leave_empties_the_group() -> None:
    cluster = Cluster()
    a, b = stable_group(cluster, ["a", "b"])
    assert cluster.coordinator.leave(G, b.member_id, now=1.0) is ErrorCode.NONE
    assert cluster.state is GroupState.PREPARING_REBALANCE
    assert cluster.join(a.member_id).result().generation_id == 3
    assert cluster.coordinator.leave(G, a.member_id, now=2.0) is ErrorCode.NONE
    group = cluster.coordinator.group(G)
    assert group is not None and (group.state, group.generation_id) == (GroupState.EMPTY, 4)
    assert cluster.coordinator.leave(G, a.member_id, now=2.0) is ErrorCode.UNKNOWN_MEMBER_ID
    assert cluster.coordinator.check_commit(G, -1, "") is ErrorCode.NONE


def test_a_rebalance_answers_waiting_syncs_and_stale_ones() -> None:
    cluster = Cluster()
    a = cluster.join(client="a").result()
    b_join = cluster.join(client="b")
    a = cluster.join(a.member_id).result()
    b = b_join.result()
    b_sync = cluster.coordinator.sync(G, b.generation_id, b.member_id, {}, now=0.0)
    cluster.join(client="c")  # before the leader assigned
    assert b_sync.result().error is ErrorCode.REBALANCE_IN_PROGRESS
    stale = cluster.coordinator.sync(G, b.generation_id - 1, b.member_id, {}, now=0.0)
    assert stale.result().error is ErrorCode.ILLEGAL_GENERATION


@pytest.mark.parametrize("session_s", [6.0, 10.0])
def test_the_next_deadline_is_the_earliest_session_end(session_s: float) -> None:
    cluster = Cluster()
    a = cluster.join(client="a", session_s=session_s).result()
    assert cluster.coordinator.next_deadline() == session_s
    cluster.coordinator.heartbeat(G, a.generation_id, a.member_id, now=2.0)
    assert cluster.coordinator.next_deadline() == 2.0 + session_s


# -- storing each generation's assignment (a coordinator that can fail over) ------------------


class StoringCluster(Cluster):
    """A coordinator whose groups are stored: ``stores`` lists each (generation, state,
    members) it was asked to write, and the test says when each write is done."""

    def __init__(self) -> None:
        super().__init__()
        self.stores: list[tuple[int, GroupState, tuple[str, ...]]] = []
        self.coordinator = GroupCoordinator(
            self.coordinator.limits,
            listener=self.heard.append,
            new_member_id=self.coordinator._new_member_id,
            store=lambda g: self.stores.append((g.generation_id, g.state, tuple(g.members))),
        )


def test_an_assignment_reaches_the_members_only_once_it_is_stored() -> None:
    cluster = StoringCluster()
    a = cluster.join(client="a").result()
    sync = cluster.coordinator.sync(G, 1, a.member_id, {a.member_id: b"mine"}, now=0.0)
    assert not sync.done and cluster.stores == [
        (1, GroupState.COMPLETING_REBALANCE, (a.member_id,))
    ]
    assert cluster.coordinator.check_commit(G, 1, a.member_id) is ErrorCode.REBALANCE_IN_PROGRESS
    # A retried sync of the leader does not store twice.
    cluster.coordinator.sync(G, 1, a.member_id, {a.member_id: b"other"}, now=0.0)
    assert len(cluster.stores) == 1
    cluster.coordinator.stored(G, 1, ErrorCode.NONE, now=0.1)
    assert sync.result().assignment == b"mine" and cluster.state is GroupState.STABLE
    assert [type(h).__name__ for h in cluster.heard] == ["Rebalanced", "Assigned"]


def test_an_assignment_not_stored_is_an_error_to_every_member_and_the_group_rebalances() -> None:
    cluster = StoringCluster()
    a = cluster.join(client="a").result()
    sync = cluster.coordinator.sync(G, 1, a.member_id, {a.member_id: b"mine"}, now=0.0)
    cluster.coordinator.stored(G, 1, ErrorCode.NOT_COORDINATOR, now=0.1)
    assert sync.result().error is ErrorCode.NOT_COORDINATOR
    assert cluster.state is GroupState.PREPARING_REBALANCE
    assert not any(isinstance(h, Assigned) for h in cluster.heard)
    # The answer to an earlier generation's store changes nothing.
    again = cluster.join(a.member_id).result()
    assert again.generation_id == 2
    cluster.coordinator.stored(G, 1, ErrorCode.NONE, now=0.2)
    assert cluster.state is GroupState.COMPLETING_REBALANCE


def test_an_emptied_group_is_stored_so_that_its_generation_is_not_reused() -> None:
    cluster = StoringCluster()
    a = cluster.join(client="a").result()
    cluster.coordinator.sync(G, 1, a.member_id, {}, now=0.0)
    cluster.coordinator.stored(G, 1, ErrorCode.NONE, now=0.0)
    assert cluster.coordinator.leave(G, a.member_id, now=1.0) is ErrorCode.NONE
    assert cluster.stores[-1] == (2, GroupState.EMPTY, ())


def test_a_restored_group_keeps_its_generation_and_an_unloaded_one_sends_its_members_away() -> None:
    from system_under_test.group_coordinator import Group, Member

    cluster = Cluster()
    member = Member("m-1", "c", "/h", 10.0, 30.0, RANGE, session_deadline=10.0, assignment=b"a")
    cluster.coordinator.restore(
        Group(G, "consumer", GroupState.STABLE, 7, "range", "m-1", {"m-1": member})
    )
    assert cluster.coordinator.heartbeat(G, 7, "m-1", now=1.0) is ErrorCode.NONE
    assert cluster.coordinator.check_commit(G, 6, "m-1") is ErrorCode.ILLEGAL_GENERATION
    joining = cluster.join(client="b")  # a rebalance begins: m-1 must join again
    cluster.coordinator.unload(G)
    assert joining.result().error is ErrorCode.NOT_COORDINATOR
    assert cluster.coordinator.group(G) is None
