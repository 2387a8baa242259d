"""Duplicates explained by producer retries without idempotence: expected, with evidence.

A producer whose first attempt timed out but landed, and whose retry landed too, writes one
value at two offsets. When test.json says the producer may retry (workload.producer_retries
> 0), or `--expect-loss retries` declares it, such a `duplicate` is expected, not invalid;
every other anomaly, `inconsistent-offsets` included, stays one.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import typer
from typer.testing import CliRunner

from checkers import CheckConfig, TestConfigError, check_history, read_test_settings
from checkers.config import TestSettings
from checkers.losses import LossRules
from squall.commands.check import check
from tests.unit.checkers.history_builder import HistoryBuilder

ALL = CheckConfig(sample=1000)


def retried_send(b: HistoryBuilder, k: str = "dup") -> dict[str, int]:
    """A clean log but for one send that landed twice (at 1 and 2; acknowledged at 2)."""
    p, c = b.process(), b.process()
    b.send1(p, k, f"{k}-0", 0)
    b.send1(p, k, f"{k}-1", 2)  # its first attempt timed out, but landed at 1
    send_index = b.writer.next_index - 1
    b.send1(p, k, f"{k}-2", 3)
    b.poll(c, {k: [(0, f"{k}-0"), (1, f"{k}-1"), (2, f"{k}-1"), (3, f"{k}-2")]})
    return {"invoke_index": send_index - 1, "index": send_index}


def _check(root: Path, test_json: dict[str, Any] | None, config: CheckConfig = ALL) -> Any:
    builder = HistoryBuilder(root, test_json=test_json)
    send = retried_send(builder)
    return check_history(builder.close(), config=config), send


def _workload(retries: int) -> dict[str, Any]:
    return {"workload": {"acks": -1, "producer_retries": retries}}


@pytest.fixture(scope="module")
def retries3(spark: Any, tmp_path_factory: pytest.TempPathFactory) -> Any:
    return _check(tmp_path_factory.mktemp("retries3"), _workload(3))


@pytest.fixture(scope="module")
def retries0(spark: Any, tmp_path_factory: pytest.TempPathFactory) -> Any:
    return _check(tmp_path_factory.mktemp("retries0"), _workload(0))


@pytest.fixture(scope="module")
def declared(spark: Any, tmp_path_factory: pytest.TempPathFactory) -> Any:
    config = CheckConfig(sample=1000, expect_loss=frozenset({"retries"}))
    return _check(tmp_path_factory.mktemp("declared"), None, config)


@pytest.fixture(scope="module")
def idempotent(spark: Any, tmp_path_factory: pytest.TempPathFactory) -> Any:
    test_json = {"workload": {"acks": -1, "producer_retries": 3, "idempotence": True}}
    return _check(tmp_path_factory.mktemp("idempotent"), test_json)


def test_an_idempotent_producers_duplicate_is_an_anomaly_whatever_its_retries(
    idempotent: Any,
) -> None:
    results, _ = idempotent
    assert results["valid"] is False
    assert results["anomaly_types"] == ["duplicate"]
    assert results["expected_anomaly_types"] == []
    config = results["config"]["test"]
    assert (config["producer_retries"], config["idempotence"]) == (3, True)
    assert config["retries_may_duplicate"] is False


def test_idempotence_in_test_json_takes_the_resending_clients_excuse_too() -> None:
    resending = TestSettings(producer_retries=0, client="confluent-kafka")
    assert resending.retries_may_duplicate and resending.client_resends is not None
    idempotent = TestSettings(producer_retries=5, client="confluent-kafka", idempotence=True)
    assert not idempotent.retries_may_duplicate and idempotent.client_resends is None
    assert LossRules(idempotent, frozenset()).landings_per_send == 1


def test_some_idempotent_producers_leave_duplicates_to_the_others_retries() -> None:
    mixed = TestSettings(producer_retries=0, client="squall", producers=2, idempotent_producers=1)
    assert not mixed.every_producer_idempotent and not mixed.retries_may_duplicate
    assert LossRules(mixed, frozenset()).landings_per_send == 1
    retrying = TestSettings(producer_retries=2, producers=2, idempotent_producers=1)
    assert retrying.retries_may_duplicate
    assert LossRules(retrying, frozenset()).landings_per_send == 3
    resending = TestSettings(client="confluent-kafka", producers=3, idempotent_producers=1)
    assert resending.client_resends is not None and resending.retries_may_duplicate
    every = TestSettings(
        producer_retries=4, client="confluent-kafka", producers=2, idempotent_producers=2
    )
    assert every.every_producer_idempotent and not every.retries_may_duplicate
    assert every.client_resends is None
    assert not TestSettings(producers=0, idempotent_producers=0).every_producer_idempotent


def test_test_json_gives_the_idempotent_producers(tmp_path: Path) -> None:
    path = tmp_path / "test.json"
    path.write_text(json.dumps({"workload": {"producers": 4, "idempotent_producers": 2}}))
    settings = read_test_settings(path)
    assert (settings.producers, settings.idempotent_producers) == (4, 2)
    assert settings.as_dict()["idempotent_producers"] == 2
    path.write_text(json.dumps({"workload": {"idempotent_producers": -1}}))
    with pytest.raises(TestConfigError, match=r"workload\.idempotent_producers is -1"):
        read_test_settings(path)
    path.write_text(json.dumps({"workload": {"producers": "two"}}))
    with pytest.raises(TestConfigError, match=r"workload\.producers is .two., expected an integer"):
        read_test_settings(path)


def test_retried_duplicate_is_expected_with_its_evidence(retries3: Any) -> None:
    results, send = retries3
    assert results["valid"] is True
    assert results["anomaly_types"] == []
    assert results["expected_anomaly_types"] == ["duplicate"]
    offsets = results["checkers"]["offsets"]
    assert offsets["valid"] is True
    assert offsets["counts"] == {"inconsistent-offsets": 0, "duplicate": 0}
    assert offsets["anomalies"] == {}
    assert offsets["expected_counts"] == {"duplicate": 1}
    assert offsets["expected"]["duplicate"] == [
        {
            "key": "dup",
            "value": "dup-1",
            "offsets": [1, 2],
            "count": 2,
            "index": 1,
            "sends": [{**send, "type": "ok", "offset": 2}],
            "expected_because": "producer retries=3 without idempotence",
        }
    ]
    config = results["config"]
    assert config["test"]["producer_retries"] == 3
    assert config["test"]["retries_may_duplicate"] is True
    assert any("producer retries=3" in note for note in config["allowances"])


def test_without_retries_a_duplicate_stays_an_anomaly(retries0: Any) -> None:
    results, _ = retries0
    assert results["valid"] is False
    assert results["anomaly_types"] == ["duplicate"]
    assert results["expected_anomaly_types"] == []
    offsets = results["checkers"]["offsets"]
    assert offsets["counts"] == {"inconsistent-offsets": 0, "duplicate": 1}
    assert "expected" not in offsets
    # The sample is today's: no send evidence, no excuse.
    assert offsets["anomalies"]["duplicate"] == [
        {"key": "dup", "value": "dup-1", "offsets": [1, 2], "count": 2, "index": 1}
    ]
    assert results["config"]["test"]["retries_may_duplicate"] is False


def test_declared_retries_excuse_a_duplicate_without_test_json(declared: Any) -> None:
    results, send = declared
    assert results["valid"] is True
    assert results["config"]["test"]["producer_retries"] is None
    assert results["config"]["expect_loss"] == ["retries"]
    (sample,) = results["checkers"]["offsets"]["expected"]["duplicate"]
    assert sample["sends"] == [{**send, "type": "ok", "offset": 2}]
    reason = "producer retries without idempotence (--expect-loss retries)"
    assert sample["expected_because"] == reason


def test_expect_loss_retries_on_the_command_line(spark: Any, tmp_path: Path) -> None:
    """`squall check --expect-loss retries`, end to end on the shared session."""
    builder = HistoryBuilder(tmp_path)
    retried_send(builder)
    run_dir = builder.close()
    app = typer.Typer(add_completion=False)
    app.command()(check)
    app.callback()(lambda: None)  # `check` as a subcommand, as in squall's CLI
    args = ["check", str(run_dir), "--json", "--no-write", "--expect-loss", "retries"]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output
    results = json.loads(result.stdout)
    assert results["valid"] is True
    assert results["config"]["expect_loss"] == ["retries"]
    assert results["checkers"]["offsets"]["expected_counts"] == {"duplicate": 1}


@pytest.fixture(scope="module")
def unexplained(spark: Any, tmp_path_factory: pytest.TempPathFactory) -> Any:
    """producer_retries=1: a retry explains two landings of a sent value, nothing more."""
    b = HistoryBuilder(tmp_path_factory.mktemp("unexplained"), test_json=_workload(1))
    retried_send(b)
    # A send that timed out (info, with its error) and landed twice: explained.
    p, c = b.process(), b.process()
    invoke = b.writer.write(p, "invoke", "send", [["send", "timeout", "timeout-0"]], time=b.tick())
    b.writer.complete(
        invoke, "info", [["send", "timeout", "timeout-0"]], time=b.tick(), error="timeout"
    )
    b.poll(c, {"timeout": [(0, "timeout-0"), (1, "timeout-0")]})
    # Three landings of one send with one retry: not a retry's doing.
    p, c = b.process(), b.process()
    b.send1(p, "thrice", "thrice-0", 2)
    b.poll(c, {"thrice": [(0, "thrice-0"), (1, "thrice-0"), (2, "thrice-0")]})
    # A value at two offsets that nobody sent: no retry explains it.
    c = b.process()
    b.poll(c, {"unsent": [(0, "unsent-0"), (1, "unsent-0")]})
    # Two values at one offset: never excused by retries.
    p, c, r = b.process(), b.process(), b.process()
    b.send1(p, "incons", "incons-0", 0)
    b.poll(c, {"incons": [(0, "incons-0")]})
    b.poll(r, {"incons": [(0, "incons-other")]}, result="info")
    # A send that never completed (pending) and landed twice: explained.
    p, c = b.process(), b.process()
    pending = b.writer.write(p, "invoke", "send", [["send", "pending", "pending-0"]], time=b.tick())
    b.poll(c, {"pending": [(0, "pending-0"), (1, "pending-0")]})
    return check_history(b.close(), config=ALL), (invoke.index, pending.index)


def test_only_duplicates_a_retry_explains_are_expected(unexplained: Any) -> None:
    results, (invoke_index, pending_index) = unexplained
    assert results["valid"] is False
    assert results["anomaly_types"] == ["duplicate", "inconsistent-offsets"]
    assert results["expected_anomaly_types"] == ["duplicate"]
    offsets = results["checkers"]["offsets"]
    assert offsets["counts"] == {"inconsistent-offsets": 1, "duplicate": 2}
    assert offsets["expected_counts"] == {"duplicate": 3}
    expected = {sample["key"]: sample for sample in offsets["expected"]["duplicate"]}
    assert set(expected) == {"dup", "timeout", "pending"}
    assert expected["timeout"]["sends"] == [
        {"invoke_index": invoke_index, "index": invoke_index + 1, "type": "info",
         "error": "timeout"}
    ]  # fmt: skip
    assert expected["pending"]["sends"] == [
        {"invoke_index": pending_index, "type": "info", "pending": True}
    ]
    assert expected["dup"]["expected_because"] == "producer retries=1 without idempotence"
    found = {sample["key"]: sample for sample in offsets["anomalies"]["duplicate"]}
    assert set(found) == {"thrice", "unsent"}
    assert "expected_because" not in found["thrice"]
    assert [send["type"] for send in found["thrice"]["sends"]] == ["ok"]
    assert "sends" not in found["unsent"]
    assert [s["key"] for s in offsets["anomalies"]["inconsistent-offsets"]] == ["incons"]


def test_producer_retries_in_test_json(tmp_path: Path) -> None:
    path = tmp_path / "test.json"
    path.write_text(json.dumps(_workload(3)))
    settings = read_test_settings(path)
    assert settings.producer_retries == 3 and settings.retries_may_duplicate
    assert settings.as_dict()["producer_retries"] == 3
    assert settings.as_dict()["retries_may_duplicate"] is True
    path.write_text(json.dumps(_workload(0)))
    assert not read_test_settings(path).retries_may_duplicate
    path.write_text(json.dumps({"workload": {"acks": 1}}))
    unknown = read_test_settings(path)
    assert unknown.producer_retries is None and not unknown.retries_may_duplicate
    for bad in (-1, "3", True, 2.5):
        path.write_text(json.dumps({"workload": {"producer_retries": bad}}))
        with pytest.raises(TestConfigError, match=r"workload\.producer_retries is .*>= 0") as err:
            read_test_settings(path)
        assert str(path) in str(err.value) and repr(bad) in str(err.value)


def test_retries_allowance() -> None:
    assert CheckConfig(expect_loss=frozenset({"retries", "acks1"})).expect_loss == {
        "retries",
        "acks1",
    }
    declared = LossRules(TestSettings(), frozenset({"retries"}))
    assert declared.retries_may_duplicate and declared.landings_per_send is None
    assert declared.default_acks is None and not declared.unclean_allowed
    configured = LossRules(TestSettings(producer_retries=2), frozenset())
    assert configured.retries_may_duplicate and configured.landings_per_send == 3
    assert configured.duplicate_reason == "producer retries=2 without idempotence"
    assert not LossRules(TestSettings(producer_retries=0), frozenset()).retries_may_duplicate
    assert not LossRules(TestSettings(), frozenset({"acks0", "unclean"})).retries_may_duplicate


def test_a_client_that_resends_on_its_own_explains_a_duplicate_without_retries(
    spark: Any, tmp_path: Path
) -> None:
    """librdkafka sends a batch again after an attempt that landed, with retries=0
    (docs/clients.md): test.json's workload.client says so, without a bound."""
    test = {"workload": {"acks": -1, "producer_retries": 0, "client": "confluent-kafka"}}
    results, _ = _check(tmp_path, test)
    assert results["valid"] is True and results["expected_anomaly_types"] == ["duplicate"]
    (case,) = results["checkers"]["offsets"]["expected"]["duplicate"]
    assert case["expected_because"] == (
        "confluent-kafka without idempotence: librdkafka sends a batch again after an attempt "
        "that landed, whatever its retries (a deposed leader's NOT_LEADER_FOR_PARTITION, a "
        "connection lost while the batch waited for its replicas)"
    )
    assert results["config"]["test"]["client"] == "confluent-kafka"
    assert results["config"]["test"]["retries_may_duplicate"] is True
    squall_client = {"workload": {"acks": -1, "producer_retries": 0, "client": "squall"}}
    assert TestSettings(producer_retries=0, client="squall").retries_may_duplicate is False
    assert read_test_settings_of(tmp_path, squall_client).client == "squall"


def read_test_settings_of(root: Path, test: dict[str, Any]) -> TestSettings:
    path = root / "squall-test.json"
    path.write_text(json.dumps(test))
    return read_test_settings(path)
