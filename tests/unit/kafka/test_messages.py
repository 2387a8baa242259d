"""Every request and response body, at every version, against Kafka's definitions.

Three independent checks: the schema table against Kafka's JSON message definitions (as
kafka-python bundles them), random values round-tripping through our codec, and the same
values encoded by kafka-python giving the same bytes and decoding to the same fields.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from system_under_test.errors import KafkaCodecError
from system_under_test.kafka.api_versions import ApiVersionsResponse
from system_under_test.kafka.apis import APIS
from system_under_test.kafka.fetch import FetchableTopicResponse, FetchResponse, PartitionData
from system_under_test.kafka.metadata import MetadataRequest
from system_under_test.kafka.schema import (
    Array,
    Body,
    StructType,
    WireType,
    decode_body,
    encode_body,
    wire_of,
)
from tests.unit.kafka.kafka_python import (
    BROKER_API_VERSIONS,
    CLASSES,
    BaseField,
    as_dict,
    their_name,
    their_value,
    theirs,
)
from tests.unit.kafka.strategies import structs

BODIES: list[type[Body]] = [cls for api in APIS.values() for cls in (api.request, api.response)]
CASES = [
    pytest.param(cls, version, id=f"{cls.__name__}-v{version}")
    for cls in BODIES
    for version in range(cls.VERSIONS[0], cls.VERSIONS[1] + 1)
]
EXAMPLES = settings(max_examples=25, deadline=None, database=None)


def test_versions_are_those_kafka_2_3_and_4_0_share_without_flexible_encoding() -> None:
    """Per API: the versions both brokers advertise, at or above 4.0's definitions' minimum
    (4.0 advertises Produce 0-2 for old clients but its definitions removed them), below the
    first flexible version."""
    for key, api in APIS.items():
        definition = CLASSES[api.request.__name__]
        defined_low = BaseField.parse_versions(definition.json["validVersions"])[0]
        flexible = BaseField.parse_versions(definition.json["flexibleVersions"])[0]
        low_23, high_23 = BROKER_API_VERSIONS[(2, 3)][key]
        low_40, high_40 = BROKER_API_VERSIONS[(4, 0)][key]
        expected = (max(defined_low, low_23, low_40), min(flexible - 1, high_23, high_40))
        assert (api.min_version, api.max_version) == expected, api.key.name
        assert api.response.VERSIONS == api.request.VERSIONS
        assert api.request.API_KEY == api.response.API_KEY == key == definition.API_KEY


def _type_name(wire_type: WireType) -> str:
    if isinstance(wire_type, Array) and isinstance(wire_type.element, StructType):
        return wire_type.element.name
    return wire_type.name


def _their_type_name(field: Any) -> str:
    if field.is_array() and not field.is_struct_array():
        return f"[]{field.array_of.type_str}"
    if field.type_str == "bitfield":  # kafka-python's retyping of an int32 (kafka_python.py)
        return "int32"
    return str(field.type_str)


def _compare_schema(cls: type[Any], their: Any, version: int, path: str) -> None:
    ours = [
        (their_name(cls, name), _type_name(wire_type), nullable)
        for name, wire_type, nullable in wire_of(cls).at(version)
    ]
    their_fields = [f for f in their._struct.fields.values() if f.for_version_q(version)]
    expected = [
        (f.name, _their_type_name(f), bool(f.nullable_for_version_q(version))) for f in their_fields
    ]
    assert ours == expected, f"{path} at version {version}"
    by_name = {f.name: f for f in their._struct.fields.values()}
    for spec in wire_of(cls).fields:
        if spec.present(version):
            if isinstance(spec.type, Array) and isinstance(spec.type.element, StructType):
                _compare_schema(
                    spec.type.element.cls,
                    by_name[spec.name].data_class,
                    version,
                    f"{path}.{spec.name}",
                )
        else:
            their = by_name[their_name(cls, spec.name)]
            default = their_value(cls, spec.name, getattr(cls(**_required(cls)), spec.name))
            assert default == their.default, f"{path}.{spec.name} default"
            assert spec.ignorable == bool(their._ignorable), f"{path}.{spec.name} ignorable"


def _required(cls: type[Any]) -> dict[str, Any]:
    """Placeholder values for the required fields, to read the others' defaults."""
    return {
        f.name: None
        for f in dataclasses.fields(cls)
        if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING
    }


@pytest.mark.parametrize(("cls", "version"), CASES)
def test_schema_matches_kafkas_definition(cls: type[Body], version: int) -> None:
    """Names, order, types, nullability per version, and the defaults of absent fields."""
    _compare_schema(cls, CLASSES[cls.__name__], version, cls.__name__)


@pytest.mark.parametrize(("cls", "version"), CASES)
def test_round_trip_and_kafka_python_agree(cls: type[Body], version: int) -> None:
    their_cls = CLASSES[cls.__name__]

    @EXAMPLES
    @given(structs(cls, version))
    def check(body: Body) -> None:
        ours = bytes(encode_body(body, version))
        assert decode_body(cls, ours, version) == body
        assert bytes(theirs(body, their_cls, version).encode(version=version)) == ours
        # kafka-python, like Kafka's clients, reads an ApiVersions error as a version 0 body
        as_read = 0 if cls is ApiVersionsResponse and body.error_code else version  # type: ignore[attr-defined]
        assert their_cls.decode(ours, version=version).to_dict(json=False) == as_dict(body, as_read)

    check()


@pytest.mark.parametrize(("cls", "version"), CASES)
def test_every_truncation_is_a_codec_error(cls: type[Body], version: int) -> None:
    @settings(max_examples=10, deadline=None, database=None)
    @given(structs(cls, version), st.data())
    def check(body: Body, data: st.DataObject) -> None:
        encoded = bytes(encode_body(body, version))
        if not encoded:
            return
        cut = data.draw(st.integers(0, len(encoded) - 1))
        with pytest.raises(KafkaCodecError):
            decode_body(cls, encoded[:cut], version)
        with pytest.raises(KafkaCodecError, match="left over"):
            decode_body(cls, encoded + b"\x00", version)

    check()


def test_a_value_a_version_cannot_carry_is_refused_unless_ignorable() -> None:
    """As Kafka's generated code: a non-default value in a field the version lacks is an error
    unless the field is ignorable, which is then left out silently."""
    response = FetchResponse(
        responses=[
            FetchableTopicResponse(
                topic="t",
                partitions=[
                    PartitionData(
                        partition_index=0,
                        error_code=0,
                        high_watermark=5,
                        log_start_offset=3,
                        preferred_read_replica=2,
                        records=None,
                    )
                ],
            )
        ]
    )
    assert decode_body(FetchResponse, encode_body(response, 11), 11) == response
    with pytest.raises(
        KafkaCodecError,
        match=r"^FetchResponse\.responses\[0\]\.partitions\[0\]\.preferred_read_replica: holds 2",
    ):
        encode_body(response, 10)
    request = MetadataRequest(topics=None, allow_auto_topic_creation=False)
    with pytest.raises(KafkaCodecError, match="allow_auto_topic_creation"):
        encode_body(request, 3)
    # the log start offset (version 5+) is ignorable: version 4 drops it
    partition = dataclasses.replace(response.responses[0].partitions[0], preferred_read_replica=-1)
    plain = FetchResponse(responses=[FetchableTopicResponse(topic="t", partitions=[partition])])
    older = decode_body(FetchResponse, encode_body(plain, 4), 4)
    assert older.responses[0].partitions[0].log_start_offset == -1
