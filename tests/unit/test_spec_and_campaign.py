from __future__ import annotations

from pathlib import Path
from xml.etree import ElementTree

import pytest

from squall.campaign import CampaignError, CaseResult, junit_xml, load_campaign, progress_line
from squall.runner import check_runnable, group_state_keys
from squall.spec import SpecError, TestSpec
from system_under_test.group_metadata_manager import partition_for


def test_spec_from_toml_and_what_it_promises(tmp_path: Path) -> None:
    path = tmp_path / "t.toml"
    path.write_text(
        'name = "t"\nnodes = 3\nseed = 5\n[broker]\n"replica.truncation" = "high-watermark"\n'
        '[workload]\nacks = -1\nreplication_factor = 3\ntopic_config = { "min.insync.replicas" = "2" }\n'
        "[nemesis]\nfaults = { kill = 1 }\ninterval_s = [1, 2]\nduration_s = [1, 2]\n"
    )
    spec = TestSpec.load(path)
    assert spec.promises_no_loss() and spec.min_insync_replicas == 2
    resolved = spec.resolved(runtime="local")
    assert resolved.seed == 5 and resolved.nemesis is not None and resolved.nemesis.seed == 5
    doc = resolved.to_json()
    assert doc["topic"] == {
        "name": spec.workload.topic,
        "partitions": spec.workload.partitions,
        "replication_factor": 3,
        "min_insync_replicas": 2,
        "unclean_leader_election": False,
        "truncation": "high-watermark",
        "flush_messages": 2**63 - 1,
        "flush_ms": 2**63 - 1,
        "flush_setting": "log.flush.interval.messages",
    }


def test_test_json_gives_the_flush_policy_in_force() -> None:
    """The checkers read from test.json whether a message is fsynced before it counts: the
    topic's flush.messages wins over the broker's log.flush.interval.messages."""
    broker = TestSpec.from_mapping(
        {
            "name": "t",
            "broker": {"log.flush.interval.messages": "1", "log.flush.interval.ms": "50"},
        },
        source="t",
    )
    assert broker.flush_policy() == (1, 50, "log.flush.interval.messages")
    topic = TestSpec.from_mapping(
        {
            "name": "t",
            "broker": {"log.flush.interval.messages": "1"},
            "workload": {"topic_config": {"flush.messages": "100"}},
        },
        source="t",
    )
    doc = topic.resolved(runtime="local").to_json()["topic"]
    assert (doc["flush_messages"], doc["flush_setting"]) == (100, "flush.messages")


@pytest.mark.parametrize(
    ("asked", "runtime", "resolved"),
    [
        (None, "docker", True),
        (None, "local", False),
        (None, "ssh", False),
        (False, "docker", False),
        (True, "local", True),
    ],
)
def test_lazy_disks_are_settled_when_the_runtime_is(
    asked: bool | None, runtime: str, resolved: bool
) -> None:
    spec = TestSpec(name="t", lazy_disk=asked)
    assert spec.resolved(runtime=runtime).lazy_disk is resolved
    assert spec.resolved(runtime=runtime).to_json()["lazy_disk"] is resolved


@pytest.mark.parametrize(
    ("doc", "message"),
    [
        ({"name": "t", "nodes": 0}, "nodes = 0"),
        ({"name": "t", "bogus": 1}, "unknown key"),
        ({"nodes": 3}, r"name: missing \(required\): a short name"),
        ({"name": "t", "broker": {"log.dirz": "x"}}, "unknown key"),
        ({"name": "t", "nodes": 1, "workload": {"replication_factor": 3}}, "needs at least"),
        (
            {"name": "t", "runtime": "vm"},
            "runtime = \"vm\": must be 'docker', 'ssh', 'local' or 'external'",
        ),
    ],
)
def test_bad_specs_say_what_is_wrong(doc: dict[str, object], message: str) -> None:
    with pytest.raises(SpecError, match=message):
        TestSpec.from_mapping(doc, source="spec.toml")


def test_campaign_matrix_and_cases(tmp_path: Path) -> None:
    path = tmp_path / "c.toml"
    path.write_text(
        'name = "c"\n[base]\nnodes = 3\n[matrix]\n"workload/acks" = [-1, 1]\n'
        '"nemesis/faults" = [{ kill = 1 }, { partition = 1 }]\n'
        '[[case]]\nname = "special"\n"broker/replica.truncation" = "high-watermark"\n'
    )
    name, cases = load_campaign(path)
    assert name == "c" and len(cases) == 5
    assert {c.spec.name for c in cases[:4]} == {
        "c-acks-all-kill",
        "c-acks-all-partition",
        "c-acks-1-kill",
        "c-acks-1-partition",
    }
    assert (
        cases[-1].spec.name == "special"
        and cases[-1].spec.broker["replica.truncation"] == "high-watermark"
    )


def test_campaign_errors_name_the_case(tmp_path: Path) -> None:
    path = tmp_path / "c.toml"
    path.write_text('[base]\nname = "c"\n[matrix]\n"nodes" = [0]\n')
    with pytest.raises(CampaignError, match="case 1"):
        load_campaign(path)
    path.write_text('[matrix]\n"workload/acks" = []\n')
    with pytest.raises(
        CampaignError, match=r'\[matrix\]\."workload/acks" = \[\]: must have at least 1'
    ):
        load_campaign(path)


def test_junit_has_a_case_per_run_with_failures_and_errors() -> None:
    xml = junit_xml(
        "c",
        [
            CaseResult("ok", {}, 0, True, [], "/r/1", 1.0),
            CaseResult("bad", {"a": 1}, 1, False, ["lost-write"], "/r/2", 2.0),
            CaseResult("infra", {}, 3, "unknown", [], None, 0.5, error="no docker"),
        ],
    )
    suite = ElementTree.fromstring(xml)
    assert suite.get("tests") == "3" and suite.get("failures") == "1" and suite.get("errors") == "1"
    cases = {c.get("name"): c for c in suite.iter("testcase")}
    assert cases["bad"].find("failure").get("message") == "anomalies: lost-write"
    assert cases["infra"].find("error").get("message") == "no docker"
    properties = {p.get("name"): p.get("value") for p in suite.iter("property")}
    assert properties == {"campaign": "c", "cases": "3", "invalid": "1"}


def test_junit_failure_message_is_the_verdict_explained() -> None:
    explained = "INVALID: lost-write (3 found) under acks=1, RF 3, min.insync 1, ..."
    bad = CaseResult("bad", {}, 1, False, ["lost-write"], "/r/2", 2.0, explanation=explained)
    suite = ElementTree.fromstring(junit_xml("c", [bad]))
    assert suite.find("testcase/failure").get("message") == explained


def test_junit_names_each_case_s_writes_lost_allowed_or_not() -> None:
    explained = "VALID, with losses the configuration allows: 761 acknowledged writes lost, ..."
    allowed = CaseResult(
        "demo-acks1", {}, 0, True, [], "/r/3", 60.0,
        expected_anomaly_types=["lost-write"], explanation=explained,
        acknowledged_lost=761, allowed_lost=761,
    )  # fmt: skip
    suite = ElementTree.fromstring(junit_xml("demo", [allowed]))
    assert suite.findtext("testcase/system-out").startswith(explained)
    properties = {p.get("name"): p.get("value") for p in suite.iter("property")}
    assert (properties["acknowledged_lost"], properties["allowed_lost"]) == ("761", "761")


def test_campaign_overrides_apply_to_every_case() -> None:
    campaign = Path(__file__).resolve().parents[2] / "campaigns" / "bug-zoo.toml"
    _name, cases = load_campaign(campaign, {"runtime": "local"})
    assert cases and all(case.spec.runtime == "local" for case in cases)
    with pytest.raises(CampaignError, match='runtime = "kubernetes": must be'):
        load_campaign(campaign, {"runtime": "kubernetes"})


def test_campaign_progress_says_which_case_how_long_and_the_verdicts_so_far() -> None:
    done = [
        CaseResult("a", {}, 0, True, [], "/r/1", 60.0),
        CaseResult("b", {}, 1, False, ["lost-write"], "/r/2", 61.0),
        CaseResult("c", {}, 3, "unknown", [], None, 1.0, error="no docker"),
    ]
    line = progress_line("zoo", 4, 5, "safe", 370.2, done)
    assert line == (
        "campaign zoo: case 4 of 5 (safe), 6 min 10 s in; so far 1 valid, 1 invalid, 1 failed"
    )
    assert progress_line("zoo", 1, 5, "acks0", 0.0, []).endswith("so far nothing yet")


def test_campaign_with_a_runtime_it_cannot_use_creates_nothing(tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from squall.cli import app

    campaign = Path(__file__).resolve().parents[2] / "campaigns" / "demo.toml"
    store = tmp_path / "store"
    result = CliRunner().invoke(
        app, ["campaign", str(campaign), "--runtime", "ssh", "--store", str(store)]
    )
    assert result.exit_code == 2, result.output
    assert "case demo-safe" in result.output and "--inventory" in result.output
    assert not store.exists()


def test_squall_s_client_tests_a_cluster_squall_did_not_deploy_as_group_members() -> None:

    def external(**workload: object) -> TestSpec:
        doc = {"name": "ext", "runtime": "external", "inventory": "c.toml", "workload": workload}
        return TestSpec.from_mapping(doc, source="test")

    with pytest.raises(SpecError, match="keep their group's offsets in ZooKeeper"):
        check_runnable(external(group_membership=False))
    check_runnable(external())  # subscribe's consumers are members of the group
    check_runnable(external(consumers=0, mix={"poll": 0, "commit": 0}))
    check_runnable(external(client="kafka-python"))


def test_the_group_s_state_partition_is_the_offsets_partition_kafka_s_rule_names() -> None:
    """Where the workload's consumers are members, the scenarios' `group-state` aim needs
    the partition of the offsets topic that holds its group: the group id's hash over the
    topic's partitions, as the brokers are configured."""
    spec = TestSpec(name="t")
    assert spec.workload.group_membership and spec.workload.group == "squall-squall-queue"
    assert group_state_keys(spec) == [
        f"__consumer_offsets-{partition_for('squall-squall-queue', 12)}"
    ]
    wider = TestSpec(name="t", broker={"offsets.topic.num.partitions": "50"})
    assert group_state_keys(wider) == [
        f"__consumer_offsets-{partition_for('squall-squall-queue', 50)}"
    ]
    assert partition_for("squall-squall-queue", 50) != partition_for("squall-squall-queue", 12)
    outside = TestSpec(name="t", workload={"group_membership": False})
    assert group_state_keys(outside) == []


def test_test_clusters_roll_segments() -> None:
    """A test's log rolls segments (Kafka's 1 GiB would never roll in a run); the `none`
    profile keeps the broker's own defaults."""
    assert TestSpec(name="t").broker_settings()["log.segment.bytes"] == "65536"
    assert "log.segment.bytes" not in TestSpec(name="t", profile="none").broker_settings()


def test_test_clusters_check_the_leaders_balance_within_a_run() -> None:
    settings = TestSpec(name="t").broker_settings()
    assert settings["leader.imbalance.check.interval.seconds"] == "30"
    none = TestSpec(name="t", profile="none").broker_settings()
    assert "leader.imbalance.check.interval.seconds" not in none
