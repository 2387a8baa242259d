"""Consumer group generations (checkers.generations) on hand-written histories: two owners
of a key in one generation, a stale generation's commit accepted; and what does not count
(shares that differ, a commit racing the rebalance, consumers outside any group, the final
read, a history whose operations carry no generation)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from checkers import CheckConfig, check_history
from tests.unit.checkers.history_builder import HistoryBuilder, unfsynced_test_json

ALL = CheckConfig(sample=100)


def group_history(b: HistoryBuilder) -> dict[str, int]:
    """Two members over k0, k1; generation 2 gives k0 to both, and member 1 commits under
    generation 1 after it. Returns the indexes the cases name."""
    for key in ("k0", "k1"):
        p = b.process()
        for i in range(3):
            b.send1(p, key, f"{key}-{i}", i)
    one, two = b.process(), b.process()
    b.subscribe(one, [])
    b.subscribe(two, [])
    b.assign(one, ["k0"], generation=1)
    b.assign(two, ["k1"], generation=1)
    b.poll(one, {"k0": [(0, "k0-0")]})
    b.commit(one, {"k0": 1}, generation=1)  # in its generation: fine
    # Invoked before generation 2 was given, completed after: a race, not a case.
    racing = b.writer.write(one, "invoke", "commit", {"k0": 1}, time=b.tick(), generation=1)
    b.assign(two, ["k0", "k1"], generation=2)
    given = b.writer.next_index - 1
    b.writer.complete(racing, "ok", {"k0": 1}, time=b.tick())
    b.assign(one, ["k0"], generation=2)
    second = b.writer.next_index - 1
    b.commit(one, {"k0": 1}, generation=1)  # generation 2 was given before: stale
    stale = b.writer.next_index - 1
    outsider = b.process()  # outside any group: no generation, not judged
    b.assign(outsider, ["k0"])
    b.commit(outsider, {"k0": 2})
    final = b.process()
    b.writer.write(final, "invoke", "assign", ["k0", "k1"], time=b.tick(), final=True)
    return {"given": given, "second": second, "stale": stale, "one": one, "two": two}


@pytest.fixture(scope="module")
def checked(spark: Any, tmp_path_factory: pytest.TempPathFactory) -> tuple[Any, dict[str, int]]:
    builder = HistoryBuilder(tmp_path_factory.mktemp("generations"))
    where = group_history(builder)
    return check_history(builder.close(), config=ALL), where


def test_two_owners_of_one_key_in_one_generation(checked: tuple[Any, dict[str, int]]) -> None:
    results, where = checked
    report = results["checkers"]["generations"]
    assert report["counts"]["generation-double-owner"] == 1
    (case,) = report["anomalies"]["generation-double-owner"]
    assert case["key"] == "k0" and case["generation"] == 2
    assert case["processes"] == sorted([where["one"], where["two"]])
    assert case["ops"] == [where["given"], where["second"]]


def test_a_stale_generations_commit_accepted(checked: tuple[Any, dict[str, int]]) -> None:
    results, where = checked
    report = results["checkers"]["generations"]
    assert report["counts"]["stale-generation-commit"] == 1  # not the racing one
    (case,) = report["anomalies"]["stale-generation-commit"]
    assert (case["key"], case["process"], case["generation"], case["newer"]) == (
        "k0",
        where["one"],
        1,
        2,
    )
    assert (case["commit"], case["assign"]) == (where["stale"], where["given"])
    assert results["valid"] is False
    assert {"generation-double-owner", "stale-generation-commit"} <= set(results["anomaly_types"])


def test_a_history_without_generations_is_not_judged(spark: Any, tmp_path: Path) -> None:
    b = HistoryBuilder(tmp_path)
    p, c = b.process(), b.process()
    b.send1(p, "k0", "k0-0", 0)
    b.assign(c, ["k0"])
    b.poll(c, {"k0": [(0, "k0-0")]})
    b.commit(c, {"k0": 1})
    results = check_history(b.close(), config=ALL)
    report = results["checkers"]["generations"]
    assert report["counts"] == {"generation-double-owner": 0, "stale-generation-commit": 0}
    assert report["valid"] is True


def test_the_rebalances_and_the_faults_on_members_are_counted(spark: Any, tmp_path: Path) -> None:
    """The details say how many generations the members were given partitions in, how many
    rebalances they went through, how many commits were refused, and what the nemesis did
    to members: each fault counted, each pause's length (to its resume, or the history's
    end)."""
    b = HistoryBuilder(tmp_path)
    member = b.process()
    b.subscribe(member, [])
    b.assign(member, ["k0"], generation=1)
    b.nemesis("pause-member", {"members": ["consumer-0"], "outcome": {"consumer-0": "paused"}})
    b.tick(8_000_000_000)
    b.nemesis("resume-member", {"members": ["consumer-0"], "outcome": {"consumer-0": "resumed"}})
    b.commit(member, {"k0": 1}, result="fail", generation=1)
    b.assign(member, [])
    b.assign(member, ["k0"], generation=3)
    b.nemesis("kill-member", {"members": ["consumer-1"], "outcome": {"consumer-1": "not-running"}})
    b.nemesis("pause-member", {"members": ["consumer-2"], "outcome": {"consumer-2": "paused"}})
    b.tick(2_000_000_000)
    b.nemesis("leave-member", {"members": ["consumer-0"], "outcome": {"consumer-0": "left"}})
    details = check_history(b.close(), config=ALL)["checkers"]["generations"]["details"]
    assert (details["generations"], details["revocations"], details["refused_commits"]) == (2, 1, 1)
    faults = details["member_faults"]
    assert faults["counts"] == {"pause-member": 2, "resume-member": 1, "leave-member": 1}
    assert faults["paused_s"][1] >= 8.0 and 2.0 <= faults["paused_s"][0] < 8.0


def test_generations_reused_after_every_broker_lost_power_are_expected(
    spark: Any, tmp_path: Path
) -> None:
    """Under a flush policy that does not fsync before acknowledging, a power loss of every
    broker may take the group's generations and commits off the offsets topic: a
    generation given again after it, and a commit of a generation since lost, are expected,
    with the reason; the same without a power loss in between are not."""
    b = HistoryBuilder(tmp_path, test_json=unfsynced_test_json(2))
    one, two, three = b.process(), b.process(), b.process()
    for p in (one, two, three):
        b.subscribe(p, [])
    b.assign(one, ["k0"], generation=4)
    b.assign(two, ["k1"], generation=4)
    nodes = ["n1", "n2", "n3"]
    b.nemesis("power-loss", {"targets": nodes, "outcome": dict.fromkeys(nodes, "lost-power")})
    b.assign(two, ["k0", "k1"], generation=2)  # the coordinator came back at generation 1
    b.commit(two, {"k0": 1}, generation=2)  # after generation 4 was given: expected
    b.assign(three, ["k0"], generation=4)  # generation 4 again, another owner of k0: expected
    b.assign(one, ["k1"], generation=5)
    b.commit(two, {"k1": 1}, generation=4)  # no power loss since generation 5: an anomaly
    results = check_history(b.close(), config=ALL)
    report = results["checkers"]["generations"]
    expected = report["expected"]
    assert [c["generation"] for c in expected["generation-double-owner"]] == [4]
    assert all(
        "power loss of every broker" in c["expected_because"]
        for c in expected["generation-double-owner"]
    )
    assert [(c["generation"], c["newer"]) for c in expected["stale-generation-commit"]] == [(2, 4)]
    (case,) = report["anomalies"]["stale-generation-commit"]
    assert (case["generation"], case["newer"]) == (4, 5)
    assert report["counts"] == {"generation-double-owner": 0, "stale-generation-commit": 1}


@pytest.mark.parametrize("offsets_min_insync", ["1", "2"])
def test_a_power_loss_of_one_broker_explains_them_only_under_an_offsets_isr_of_one(
    spark: Any, tmp_path: Path, offsets_min_insync: str
) -> None:
    """With offsets.topic.min.insync.replicas=1 an ISR of one may have acknowledged the
    group's records, so a power loss of any one broker may take them (a generation given
    again is then expected, with that reason); with 2, a minority's power loss keeps them
    on a replica that had its power, and the same history is an anomaly."""
    test = unfsynced_test_json(
        int(offsets_min_insync), offsets_min_insync_replicas=offsets_min_insync
    )
    b = HistoryBuilder(tmp_path, test_json=test)
    one, two = b.process(), b.process()
    for p in (one, two):
        b.subscribe(p, [])
    b.assign(one, ["k0"], generation=2)
    b.nemesis("power-loss", {"targets": ["n3"], "outcome": {"n3": "lost-power"}})
    b.assign(two, ["k0"], generation=2)  # generation 2 given again, to another member
    report = check_history(b.close(), config=ALL)["checkers"]["generations"]
    if offsets_min_insync == "1":
        (case,) = report["expected"]["generation-double-owner"]
        assert "power loss of n3" in case["expected_because"]
        assert "offsets.topic.min.insync.replicas=1" in case["expected_because"]
        assert report["counts"]["generation-double-owner"] == 0
    else:
        assert report["counts"]["generation-double-owner"] == 1


def test_an_assignment_written_after_a_power_loss_may_date_from_before_it(
    spark: Any, tmp_path: Path
) -> None:
    """A member learns of a rebalance inside a poll and writes it after: an assignment
    recorded just after a power loss that took the group's state may have been given before
    it, so the same generation given again later is expected (seed 93004 of the detection
    runs: the loss came between the member's subscribe and its first assignment's record);
    a member that wrote a commit after the loss and before its assignment learnt it after."""
    test = unfsynced_test_json(1, offsets_min_insync_replicas="1")
    b = HistoryBuilder(tmp_path, test_json=test)
    one, two, three = b.process(), b.process(), b.process()
    for p in (one, two, three):
        b.subscribe(p, [])
    b.nemesis("power-loss", {"targets": ["n2"], "outcome": {"n2": "lost-power"}})
    b.assign(one, [])  # everything revoked, then the new assignment, written after the loss
    b.assign(one, ["k0"], generation=3)
    b.assign(two, ["k0"], generation=3)  # the group began again, and reached 3 again
    b.commit(three, {"k1": 1})  # a completed row after the loss: three learns after it
    b.assign(three, ["k1"], generation=5)
    b.assign(two, ["k1"], generation=5)
    report = check_history(b.close(), config=ALL)["checkers"]["generations"]
    (case,) = report["expected"]["generation-double-owner"]
    assert case["generation"] == 3 and "power loss of n2" in case["expected_because"]
    (anomaly,) = report["anomalies"]["generation-double-owner"]
    assert anomaly["generation"] == 5
