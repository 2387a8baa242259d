"""Faults as data: validation, the JSON round trip, and what a resolved fault is."""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from nemesis.errors import FaultError
from nemesis.fault import Fault
from nemesis.grudge import SHAPES, TARGETED_SHAPES

TARGETS = [
    "n1",
    "n2",
    "node:n3",
    "zk1",
    "zk",
    "leader:t-0",
    "follower:orders-12",
    "controller",
    "random",
    "minority",
    "brokers",
    "all",
]
NODES = ["n1", "n2", "n3", "zk1"]

targets = st.lists(st.sampled_from(TARGETS), min_size=1, max_size=4)
json_leaf = (
    st.none()
    | st.booleans()
    | st.integers()
    | st.text(max_size=8)
    | st.floats(allow_nan=False, allow_infinity=False)
)
extras = st.dictionaries(
    st.sampled_from(["note", "outcome", "roles", "x"]),
    st.recursive(json_leaf, lambda inner: st.lists(inner, max_size=3), max_leaves=5),
    max_size=2,
)
grudges = st.dictionaries(
    st.sampled_from(NODES), st.lists(st.sampled_from(NODES), min_size=1, unique=True), min_size=1
).filter(lambda g: all(dst not in srcs for dst, srcs in g.items()))


@st.composite
def faults(draw: st.DrawFn) -> Fault:
    kind = draw(st.sampled_from(["process", "heal", "partition", "netem", "stop"]))
    value: dict[str, object] = dict(draw(extras))
    if kind == "process":
        value["targets"] = draw(targets)
        return Fault(draw(st.sampled_from(["kill", "bounce", "pause", "freeze"])), value)
    if kind == "heal":
        if draw(st.booleans()):
            value["targets"] = draw(targets)
        return Fault(draw(st.sampled_from(["start", "resume", "unfreeze", "stop-netem"])), value)
    if kind == "partition":
        shape = draw(st.sampled_from(SHAPES))
        value.update(shape=shape, among=draw(st.sampled_from(["all", "brokers"])))
        if draw(st.booleans()):
            value["grudge"] = draw(grudges)
        elif shape in TARGETED_SHAPES and draw(st.booleans()):
            value["targets"] = draw(targets)
        return Fault("start-partition", value)
    if kind == "netem":
        value.update(
            delay_ms=draw(st.floats(min_value=1, max_value=5000)),
            jitter_ms=draw(st.floats(min_value=0, max_value=500)),
            loss_pct=draw(st.floats(min_value=0, max_value=99.9)),
            distribution=draw(st.sampled_from([None, "normal", "pareto"])),
            targets=draw(targets),
        )
        return Fault("start-netem", value)
    return Fault("stop-partition", value)


@given(faults())
def test_json_round_trip(fault: Fault) -> None:
    assert Fault.from_json(fault.to_json()) == fault
    assert Fault.loads(fault.dumps()) == fault
    assert Fault.from_json(json.loads(json.dumps(fault.to_json()))) == fault


@given(faults())
def test_request_drops_only_what_applying_added(fault: Fault) -> None:
    request = fault.request()
    assert request.f == fault.f
    assert set(request.value) == set(fault.value) - {"outcome", "roles"}
    assert request.request() == request


def test_the_value_is_a_private_copy() -> None:
    targets = ["n1"]
    fault = Fault("kill", {"targets": targets})
    targets.append("n2")
    assert fault.targets == ["n1"]
    assert Fault("kill", {"targets": ("n1",)}).value == {"targets": ["n1"]}


def test_resolved_faults() -> None:
    assert Fault("kill", {"targets": ["n1", "zk1"]}).is_resolved
    assert not Fault("kill", {"targets": ["leader:t-0"]}).is_resolved
    assert not Fault("start-partition", {"shape": "halves"}).is_resolved
    resolved = Fault("start-partition", {"shape": "halves", "grudge": {"n1": ["n2"]}})
    assert resolved.is_resolved
    assert resolved.grudge is not None and resolved.grudge.to_json() == {"n1": ["n2"]}


@pytest.mark.parametrize(
    ("f", "value", "message"),
    [
        ("explode", {}, "unknown fault 'explode'"),
        ("kill", {}, "kill needs targets"),
        ("kill", {"targets": "n1"}, "must be a list"),
        ("kill", {"targets": ["leader:"]}, "expected node:NAME"),
        ("kill", {"targets": ["leader:t"]}, "not a TOPIC-PARTITION key"),
        ("kill", {"targets": ["n1"], "destinations": ["n2"]}, "takes no destinations"),
        ("pause", {"targets": ["n1"], "when": float("nan")}, "not plain JSON"),
        ("start-partition", {}, 'needs a "shape"'),
        ("start-partition", {"shape": "square"}, "unknown partition shape"),
        ("start-partition", {"shape": "halves", "targets": ["n1"]}, "takes no targets"),
        ("start-partition", {"grudge": {"n1": ["n1"]}}, "own packets"),
        ("start-partition", {"grudge": {"n1": []}}, "cuts nothing"),
        ("start-partition", {"grudge": ["n1"]}, "must be an object"),
        ("start-partition", {"shape": "halves", "among": "zk"}, "among must be"),
        ("start-netem", {"delay_ms": -1}, "must be a number >= 0"),
        ("start-netem", {"loss_pct": 100}, "below 100"),
        ("start-netem", {}, "needs delay_ms"),
        ("start-netem", {"delay_ms": 5, "distribution": "zipf"}, "distribution"),
    ],
)
def test_invalid_faults_say_what_is_wrong(f: str, value: dict[str, object], message: str) -> None:
    with pytest.raises(FaultError, match=message):
        Fault(f, value)


def test_from_json_rejects_non_faults() -> None:
    with pytest.raises(FaultError, match='"f": NAME'):
        Fault.from_json(["kill"])
    with pytest.raises(FaultError, match="must be JSON"):
        Fault.loads("{kill")
