"""Standalone mode: one broker, no ZooKeeper, leader of every partition it holds.

Topics and their configuration overrides live in ``standalone-topics.json`` in the first log
dir, written atomically (temp file, fsync, rename, fsync of the directory), so a restart
finds them. Partition directories found on disk but missing from the file are adopted.
The ZooKeeper-mode controller will offer the same two entry points (startup, create_topics).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping
from pathlib import Path

from system_under_test.config import BrokerConfig
from system_under_test.errors import ErrorCode
from system_under_test.log.checkpoint import replace_file
from system_under_test.log.log import LogConfig
from system_under_test.log.log_manager import (
    LogManager,
)
from system_under_test.metadata_cache import BrokerEndpoint, MetadataCache, PartitionState
from system_under_test.replication.partition import Partition
from system_under_test.topic_spec import (
    CreatableTopic,
    CreatableTopicResult,
    CreateTopicError,
    TopicSpec,
    request_errors,
    validate_creatable_topic,
)

log = logging.getLogger(__name__)

STANDALONE_TOPICS_FILE = "standalone-topics.json"
FORMAT_VERSION = 1


class TopicStoreError(RuntimeError):
    """standalone-topics.json exists but cannot be read."""


class StandaloneTopicStore:
    """Reads and atomically rewrites standalone-topics.json."""

    def __init__(self, log_dir: Path) -> None:
        self.path = log_dir / STANDALONE_TOPICS_FILE

    def load(self) -> dict[str, TopicSpec]:
        if not self.path.exists():
            return {}
        try:
            data = json.loads(self.path.read_text())
            if data.get("version") != FORMAT_VERSION:
                raise ValueError(f"version {data.get('version')!r}, expected {FORMAT_VERSION}")
            return {
                name: TopicSpec(
                    name,
                    int(spec["partitions"]),
                    {str(k): str(v) for k, v in spec["config"].items()},
                )
                for name, spec in data["topics"].items()
            }
        except (OSError, ValueError, KeyError, TypeError, AttributeError) as err:
            raise TopicStoreError(
                f"cannot read {self.path}: {err}; fix or remove the file (topics will then be "
                "adopted from the partition directories with default configs)"
            ) from None

    def save(self, topics: Mapping[str, TopicSpec]) -> None:
        data = {
            "version": FORMAT_VERSION,
            "topics": {
                name: {"partitions": spec.partitions, "config": spec.config}
                for name, spec in sorted(topics.items())
            },
        }
        replace_file(self.path, (json.dumps(data, indent=2, sort_keys=True) + "\n").encode())


class StandaloneController:
    """Creates topics and keeps the metadata cache for a broker that is the whole cluster."""

    def __init__(
        self,
        config: BrokerConfig,
        log_manager: LogManager,
        metadata: MetadataCache,
        partitions: dict[tuple[str, int], Partition],
    ) -> None:
        self.config = config
        self.broker_id = config.broker_id
        self.log_manager = log_manager
        self.metadata = metadata
        self.partitions = partitions
        self.store = StandaloneTopicStore(config.log_dirs[0])
        self.topics: dict[str, TopicSpec] = {}

    def startup(self) -> None:
        """Load the topic file and every log; adopt partition directories it does not list."""
        self.topics = self.store.load()
        self.log_manager.startup(
            {name: self._log_config(spec.config) for name, spec in self.topics.items()}
        )
        found: dict[str, int] = {}
        for topic, partition in self.log_manager.all_logs():
            found[topic] = max(found.get(topic, 0), partition + 1)
        adopted = False
        for topic, count in sorted(found.items()):
            spec = self.topics.get(topic)
            if spec is None or spec.partitions < count:
                log.warning(
                    "adopting topic %s with %d partition(s) found on disk but not in %s",
                    topic,
                    count,
                    self.store.path,
                )
                self.topics[topic] = TopicSpec(topic, count, spec.config if spec else {})
                adopted = True
        if adopted:
            self.store.save(self.topics)
        for spec in self.topics.values():
            self._host(spec)
        self.metadata.controller_id = self.broker_id
        log.info("standalone broker %d hosts %d topic(s)", self.broker_id, len(self.topics))

    def register_endpoint(self, host: str, port: int) -> None:
        """Publish this broker's address (known once the listener is bound)."""
        self.metadata.set_broker(BrokerEndpoint(self.broker_id, host, port))

    async def create_topics(
        self, topics: list[CreatableTopic], timeout_ms: int
    ) -> list[CreatableTopicResult]:
        """Validate every topic, persist the valid ones in one write, then create them.

        One result per topic, in request order.
        """
        outcomes: list[TopicSpec | CreateTopicError] = []
        for topic, error in zip(topics, request_errors(topics, self.config), strict=True):
            if error is None:
                try:
                    outcomes.append(self._validate(topic))
                except CreateTopicError as err:
                    outcomes.append(err)
            else:
                outcomes.append(error)
        specs = [o for o in outcomes if isinstance(o, TopicSpec)]
        storage_error: OSError | None = None
        if specs:
            self.topics.update((spec.name, spec) for spec in specs)
            try:
                self.store.save(self.topics)
            except OSError as err:
                storage_error = err
        results: list[CreatableTopicResult] = []
        for topic, outcome in zip(topics, outcomes, strict=True):
            if isinstance(outcome, CreateTopicError):
                results.append(CreatableTopicResult(topic.name, outcome.code, outcome.message))
                continue
            failure = storage_error
            if failure is None:
                try:
                    self._host(outcome)
                except OSError as err:
                    failure = err
            if failure is not None:
                log.error("creating topic %s failed: %s", topic.name, failure)
                results.append(
                    CreatableTopicResult(
                        topic.name, ErrorCode.KAFKA_STORAGE_ERROR, f"storage error: {failure}"
                    )
                )
                continue
            log.info(
                "created topic %s with %d partition(s), config %s",
                outcome.name,
                outcome.partitions,
                outcome.config,
            )
            results.append(CreatableTopicResult(topic.name, ErrorCode.NONE, None))
        return results

    def _validate(self, topic: CreatableTopic) -> TopicSpec:
        existing = self.topics.get(topic.name)
        if existing is not None:
            raise CreateTopicError(
                ErrorCode.TOPIC_ALREADY_EXISTS,
                f"topic {topic.name!r} already exists with {existing.partitions} partition(s)",
            )
        spec = validate_creatable_topic(topic, self.config)
        if spec.replication_factor != 1:
            raise CreateTopicError(
                ErrorCode.INVALID_REPLICATION_FACTOR,
                f"replication factor {spec.replication_factor} is impossible on a standalone "
                "broker, which is the only replica of every partition; use 1, or run brokers "
                "with zookeeper.connect",
            )
        return spec

    def _log_config(self, overrides: Mapping[str, str]) -> LogConfig:
        return LogConfig.from_mapping({**self.config.topic_defaults(), **overrides})

    def _host(self, spec: TopicSpec) -> None:
        """Create (or find) the logs of a topic and lead all of its partitions."""
        log_config = self._log_config(spec.config)
        states: dict[int, PartitionState] = {}
        for number in range(spec.partitions):
            key = (spec.name, number)
            if key not in self.partitions:
                partition_log = self.log_manager.get_or_create_log(spec.name, number, log_config)
                self.partitions[key] = Partition(
                    spec.name, number, partition_log, local_broker_id=self.broker_id
                )
            states[number] = PartitionState(self.broker_id, 0, (self.broker_id,), (self.broker_id,))
        self.metadata.set_topic(spec.name, states)
