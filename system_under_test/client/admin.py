"""The admin client: create and describe topics, list offsets, list brokers."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from types import TracebackType
from typing import Literal

from system_under_test.client.consumer import list_offsets_request, offset_from_response
from system_under_test.client.exceptions import BrokerUnavailableError
from system_under_test.client.metadata import ClusterMetadata
from system_under_test.errors import BrokerError, ErrorCode
from system_under_test.kafka.api_versions import ApiVersion, ApiVersionsRequest, ApiVersionsResponse
from system_under_test.kafka.create_topics import (
    CreatableTopic,
    CreatableTopicConfig,
    CreateTopicsRequest,
    CreateTopicsResponse,
)
from system_under_test.kafka.list_offsets import (
    EARLIEST_TIMESTAMP,
    LATEST_TIMESTAMP,
    ListOffsetsResponse,
)

DEFAULT = -1
"""num_partitions or replication_factor that asks for the broker's default."""


@dataclass(frozen=True, slots=True)
class BrokerDescription:
    id: int
    host: str
    port: int


@dataclass(frozen=True, slots=True)
class PartitionDescription:
    partition: int
    leader: int
    leader_epoch: int
    replicas: list[int]
    isr: list[int]


@dataclass(frozen=True, slots=True)
class TopicDescription:
    name: str
    partitions: list[PartitionDescription]


class AdminClient:
    """Cluster administration through any broker (the controller for topic creation)."""

    def __init__(
        self,
        bootstrap: str | Sequence[str],
        *,
        client_id: str = "squall-admin",
        request_timeout_ms: int = 30000,
    ) -> None:
        self._metadata = ClusterMetadata(
            bootstrap, client_id=client_id, request_timeout_s=request_timeout_ms / 1000
        )
        self._timeout_ms = request_timeout_ms

    def __enter__(self) -> AdminClient:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def create_topic(
        self,
        name: str,
        partitions: int,
        *,
        replication_factor: int = 1,
        config: Mapping[str, str] | None = None,
    ) -> None:
        """Create a topic; BrokerError (e.g. TopicAlreadyExistsError) with the broker's reason."""
        topic = CreatableTopic(
            name=name,
            num_partitions=partitions,
            replication_factor=replication_factor,
            assignments=[],
            configs=[CreatableTopicConfig(name=k, value=str(v)) for k, v in (config or {}).items()],
        )
        request = CreateTopicsRequest(topics=[topic], timeout_ms=self._timeout_ms)
        response = self._to_controller(request)
        for result in response.topics:
            if result.name == name and result.error_code != ErrorCode.NONE:
                raise BrokerError.for_code(
                    result.error_code, result.error_message or f"creating topic {name!r} failed"
                )

    def describe_topics(self, names: Sequence[str] | None = None) -> list[TopicDescription]:
        """Leaders, epochs, replicas and ISR of the named topics (all when None)."""
        response = self._metadata.refresh(None if names is None else list(names))
        out: list[TopicDescription] = []
        for topic in response.topics:
            if topic.error_code != ErrorCode.NONE:
                raise BrokerError.for_code(
                    topic.error_code, f"describing topic {topic.name!r} failed"
                )
            partitions = [
                PartitionDescription(
                    p.partition_index,
                    p.leader_id,
                    p.leader_epoch,
                    list(p.replica_nodes),
                    list(p.isr_nodes),
                )
                for p in sorted(topic.partitions, key=lambda p: p.partition_index)
            ]
            out.append(TopicDescription(topic.name, partitions))
        return sorted(out, key=lambda t: t.name)

    def list_offsets(
        self, topic: str, partition: int, spec: Literal["earliest", "latest"] | int
    ) -> int:
        """The earliest offset, the latest (high watermark), or the first offset whose
        timestamp is >= spec ms (-1 if there is none)."""
        if spec == "earliest":
            timestamp = EARLIEST_TIMESTAMP
        elif spec == "latest":
            timestamp = LATEST_TIMESTAMP
        elif isinstance(spec, int) and spec >= 0:
            timestamp = spec
        else:
            raise ValueError(
                f"spec={spec!r}: expected 'earliest', 'latest' or a timestamp in ms >= 0"
            )
        conn = self._metadata.leader_connection(topic, partition)
        request = list_offsets_request(topic, partition, timestamp)
        response = conn.request(request, ListOffsetsResponse, timeout_s=self._timeout_ms / 1000)
        return offset_from_response(response, topic, partition)

    def brokers(self) -> list[BrokerDescription]:
        """Every live broker."""
        response = self._metadata.refresh([])
        return sorted(
            (BrokerDescription(b.node_id, b.host, b.port) for b in response.brokers),
            key=lambda b: b.id,
        )

    def api_versions(self) -> list[ApiVersion]:
        """The APIs and versions a broker supports."""
        response = self._metadata.any_request(ApiVersionsRequest(), ApiVersionsResponse)
        return list(response.api_keys)

    def close(self) -> None:
        self._metadata.close()

    def _to_controller(self, request: CreateTopicsRequest) -> CreateTopicsResponse:
        self._metadata.refresh([])
        controller = self._metadata.controller_id
        if controller in self._metadata.brokers:
            try:
                conn = self._metadata.connection(controller)
                return conn.request(
                    request, CreateTopicsResponse, timeout_s=self._timeout_ms / 1000 + 5
                )
            except BrokerUnavailableError:
                pass
        return self._metadata.any_request(request, CreateTopicsResponse)
