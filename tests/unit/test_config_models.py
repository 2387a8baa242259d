"""Configuration models: unknown keys and bad values are named with their path, the value and
what is valid; the published JSON Schemas are what the models generate."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import typer

from nemesis import generate_schedule
from squall.campaign import CampaignError, load_campaign
from squall.cluster.inventory import InventoryError, parse_inventory
from squall.commands.run import build_spec
from squall.config import ConfigurationError, read_toml, set_path
from squall.config.schedule_file import ScheduleDocument, schedule_from_json
from squall.schemas import SCHEMA_DIR, stale_schemas
from squall.spec import SpecError, TestDocument, TestSpec


def spec_error(doc: dict[str, object]) -> str:
    with pytest.raises(SpecError) as raised:
        TestSpec.from_mapping({"name": "t", **doc}, source="spec.toml")
    return str(raised.value)


@pytest.mark.parametrize(
    ("doc", "message"),
    [
        ({"nodez": 3}, 'spec.toml: nodez: unknown key; did you mean "nodes"?'),
        (
            {"workload": {"ratez": 1}},
            'spec.toml: [workload].ratez: unknown key; did you mean "rate"?',
        ),
        (
            {"workload": {"mix": {"sends": 1}}},
            '[workload].mix.sends: unknown key; did you mean "send"?',
        ),
        (
            {"nemesis": {"faults": {"kill": 1}, "intervals": [1, 2]}},
            "[nemesis].intervals: unknown key",
        ),
        (
            {"nemesis": {"faults": {"kil": 1}}},
            '[nemesis].faults.kil: unknown key; did you mean "kill"?',
        ),
        (
            {"nemesis": {"faults": {"kill": 1}, "netem": {"delay": 5}}},
            "[nemesis].netem.delay: unknown key",
        ),
        (
            {"broker": {"log.dirz": "/x"}},
            '[broker]."log.dirz": unknown key; did you mean "log.dirs"?',
        ),
    ],
)
def test_an_unknown_key_of_a_spec_is_named(doc: dict[str, object], message: str) -> None:
    assert message in spec_error(doc)


@pytest.mark.parametrize(
    ("doc", "message"),
    [
        ({"workload": {"rate": -5}}, "spec.toml: [workload].rate = -5: must be greater than 0"),
        (
            {"nemesis": {"faults": {"kill": 1}, "interval_s": [10, 5]}},
            "spec.toml: [nemesis].interval_s = [10, 5]: expected [min, max] seconds with min <= max",
        ),
        (
            {"nemesis": {"faults": {"kill": 1}, "interval_s": "5,10"}},
            '[nemesis].interval_s = "5,10": must be a valid tuple',
        ),
        ({"time_limit_s": "60"}, 'time_limit_s = "60": must be a valid number'),
        (
            {"runtime": "dokcer"},
            "must be 'docker', 'ssh', 'local' or 'external' (did you mean \"docker\"?)",
        ),
        ({"broker": {"num.partitions": "many"}}, "[broker]: num.partitions='many' is not valid"),
        ({"workload": {"acks": "all"}}, '[workload].acks = "all": must be -1, 0 or 1'),
        (
            {"nemesis": {"faults": {"kill": 1}, "targets": {"kill": ["lead er"]}}},
            "[nemesis].targets.kill[0] = \"lead er\": target 'lead er' is neither",
        ),
    ],
)
def test_a_bad_value_is_named_by_its_path(doc: dict[str, object], message: str) -> None:
    assert message in spec_error(doc)


def test_every_problem_is_listed() -> None:
    message = spec_error({"nodes": 0, "workload": {"partitions": 0}})
    assert message.startswith("spec.toml: 2 problems:\n")
    assert "  nodes = 0: must be greater than or equal to 1" in message
    assert "  [workload].partitions = 0: must be greater than or equal to 1" in message


def test_an_unknown_key_of_an_inventory_is_named() -> None:
    for text, message in [
        ("[defaults]\nportt = 22\n", '[defaults].portt: unknown key; did you mean "port"?'),
        (
            '[[brokers]]\nname = "n1"\nhots = "h"\n',
            'brokers[0].hots: unknown key; did you mean "host"?',
        ),
        (
            '[zookeeper]\nhost = "h"\nusre = "u"\n',
            '[zookeeper].usre: unknown key; did you mean "user"?',
        ),
        ("[brokerz]\n", 'brokerz: unknown key; did you mean "brokers"?'),
    ]:
        with pytest.raises(InventoryError) as raised:
            parse_inventory(text, source="hosts.toml")
        assert str(raised.value).startswith("hosts.toml: ")
        assert message in str(raised.value)


def test_an_unknown_key_of_a_campaign_is_named(tmp_path: Path) -> None:
    path = tmp_path / "c.toml"
    path.write_text("[bsae]\nnodes = 3\n")
    with pytest.raises(CampaignError, match=r'c\.toml: bsae: unknown key; did you mean "base"\?'):
        load_campaign(path)
    path.write_text("[base]\nnodez = 3\n")
    with pytest.raises(
        CampaignError, match=r'case 1 \(c\): nodez: unknown key; did you mean "nodes"'
    ):
        load_campaign(path)
    path.write_text('[base]\nnodes = 3\n[matrix]\n"nodes/count" = [1]\n')
    with pytest.raises(CampaignError, match=r"cannot set 'nodes/count': 'nodes' is 3, not a table"):
        load_campaign(path)


def test_the_cli_layers_flags_on_a_spec_file_and_refuses_with_exit_2(tmp_path: Path) -> None:
    path = tmp_path / "t.toml"
    path.write_text('name = "t"\n[workload]\nacks = 1\n')
    spec = build_spec(path, {"workload/rate": 10.0, "nemesis/faults": {"kill": 1.0}, "seed": None})
    assert (spec.workload.acks, spec.workload.rate, spec.seed) == (1, 10.0, None)
    assert spec.nemesis is not None and spec.nemesis.faults == {"kill": 1.0}
    with pytest.raises(typer.Exit) as raised:
        build_spec(path, {"workload/acks/x": 1})
    assert raised.value.exit_code == 2
    with pytest.raises(typer.Exit):
        build_spec(path, {"nemesis/faults": {"kil": 1.0}})


def test_toml_and_override_paths_fail_with_the_file(tmp_path: Path) -> None:
    with pytest.raises(ConfigurationError, match=r"cannot read spec .*absent\.toml"):
        read_toml(tmp_path / "absent.toml", what="spec")
    (tmp_path / "bad.toml").write_text("x = \n")
    with pytest.raises(ConfigurationError, match=r"bad\.toml: not valid TOML"):
        read_toml(tmp_path / "bad.toml", what="spec")
    doc: dict[str, object] = {}
    set_path(doc, "workload/topic_config/min.insync.replicas", "2", source="flags")
    assert doc == {"workload": {"topic_config": {"min.insync.replicas": "2"}}}


def test_test_json_and_schedule_json_match_their_models() -> None:
    spec = TestSpec.from_mapping(
        {"name": "t", "nemesis": {"faults": {"kill": 1, "partition": 1}, "interval_s": [1, 2]}},
        source="spec.toml",
    ).resolved(runtime="local")
    test_json = json.loads(json.dumps({**spec.to_json(), "run_id": "r1", "git_commit": None}))
    document = TestDocument.model_validate(test_json)
    assert document.topic.min_insync_replicas == 1
    assert (
        TestSpec.from_mapping(
            {k: v for k, v in test_json.items() if k in TestSpec.model_fields}, source="test.json"
        )
        == spec
    )
    assert spec.nemesis is not None
    schedule = generate_schedule(spec.nemesis)
    schedule_json = json.loads(schedule.dumps())
    ScheduleDocument.model_validate(schedule_json)
    assert schedule_from_json(schedule_json, source="schedule.json") == schedule
    with pytest.raises(ConfigurationError, match=r"schedule\.json: faults\[0\]\.at_s = -1"):
        schedule_from_json(
            {**schedule_json, "faults": [{**schedule_json["faults"][0], "at_s": -1}]},
            source="schedule.json",
        )


def test_the_published_schemas_are_what_the_models_generate() -> None:
    assert stale_schemas(SCHEMA_DIR) == [], "run: python -m squall.schemas"
