"""The APIs the codec implements: for each key, its request and response bodies and versions."""

from __future__ import annotations

from dataclasses import dataclass

from system_under_test.kafka.api_keys import ApiKey
from system_under_test.kafka.api_versions import ApiVersion, ApiVersionsRequest, ApiVersionsResponse
from system_under_test.kafka.create_topics import CreateTopicsRequest, CreateTopicsResponse
from system_under_test.kafka.fetch import FetchRequest, FetchResponse
from system_under_test.kafka.find_coordinator import (
    FindCoordinatorRequest,
    FindCoordinatorResponse,
)
from system_under_test.kafka.heartbeat import HeartbeatRequest, HeartbeatResponse
from system_under_test.kafka.init_producer_id import InitProducerIdRequest, InitProducerIdResponse
from system_under_test.kafka.join_group import JoinGroupRequest, JoinGroupResponse
from system_under_test.kafka.leave_group import LeaveGroupRequest, LeaveGroupResponse
from system_under_test.kafka.list_offsets import ListOffsetsRequest, ListOffsetsResponse
from system_under_test.kafka.metadata import MetadataRequest, MetadataResponse
from system_under_test.kafka.offset_commit import OffsetCommitRequest, OffsetCommitResponse
from system_under_test.kafka.offset_fetch import OffsetFetchRequest, OffsetFetchResponse
from system_under_test.kafka.produce import ProduceRequest, ProduceResponse
from system_under_test.kafka.schema import Body
from system_under_test.kafka.sync_group import SyncGroupRequest, SyncGroupResponse


@dataclass(frozen=True, slots=True)
class Api:
    """One API: its key, its bodies, and the versions the codec speaks."""

    key: ApiKey
    request: type[Body]
    response: type[Body]

    @property
    def min_version(self) -> int:
        return self.request.VERSIONS[0]

    @property
    def max_version(self) -> int:
        return self.request.VERSIONS[1]

    def supports(self, version: int) -> bool:
        return self.min_version <= version <= self.max_version


APIS: dict[int, Api] = {
    api.key: api
    for api in (
        Api(ApiKey.PRODUCE, ProduceRequest, ProduceResponse),
        Api(ApiKey.FETCH, FetchRequest, FetchResponse),
        Api(ApiKey.LIST_OFFSETS, ListOffsetsRequest, ListOffsetsResponse),
        Api(ApiKey.METADATA, MetadataRequest, MetadataResponse),
        Api(ApiKey.OFFSET_COMMIT, OffsetCommitRequest, OffsetCommitResponse),
        Api(ApiKey.OFFSET_FETCH, OffsetFetchRequest, OffsetFetchResponse),
        Api(ApiKey.FIND_COORDINATOR, FindCoordinatorRequest, FindCoordinatorResponse),
        Api(ApiKey.JOIN_GROUP, JoinGroupRequest, JoinGroupResponse),
        Api(ApiKey.HEARTBEAT, HeartbeatRequest, HeartbeatResponse),
        Api(ApiKey.LEAVE_GROUP, LeaveGroupRequest, LeaveGroupResponse),
        Api(ApiKey.SYNC_GROUP, SyncGroupRequest, SyncGroupResponse),
        Api(ApiKey.API_VERSIONS, ApiVersionsRequest, ApiVersionsResponse),
        Api(ApiKey.CREATE_TOPICS, CreateTopicsRequest, CreateTopicsResponse),
        Api(ApiKey.INIT_PRODUCER_ID, InitProducerIdRequest, InitProducerIdResponse),
    )
}
"""Every API of Kafka's protocol the codec implements, by key."""


def supported_versions() -> list[ApiVersion]:
    """The version ranges an ApiVersions response lists, by key."""
    return [
        ApiVersion(api_key=int(key), min_version=api.min_version, max_version=api.max_version)
        for key, api in sorted(APIS.items())
    ]
