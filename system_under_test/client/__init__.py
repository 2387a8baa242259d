"""The squall client library: Producer, Consumer and AdminClient over blocking sockets.

Usable from scripts and threads. Every name a user needs is importable from here::

    from system_under_test.client import Producer, Consumer, AdminClient, ProduceError

A Consumer with ``group.id`` and ``zookeeper.connect`` keeps its group's committed offsets
in ZooKeeper (ZooKeeperOffsetStore), as Kafka 0.8's high-level consumer did.
"""

from system_under_test.client.admin import (
    AdminClient,
    BrokerDescription,
    PartitionDescription,
    TopicDescription,
)
from system_under_test.client.batch import RecordMetadata, SendFuture
from system_under_test.client.connection import parse_bootstrap
from system_under_test.client.consumer import ConsumedRecord, Consumer, FetchResult
from system_under_test.client.exceptions import (
    BrokerUnavailableError,
    ClientConfigError,
    ClientError,
    ConnectionLostError,
    CorruptResponseError,
    NoOffsetForPartitionError,
    OffsetCommitError,
    OffsetStoreError,
    ProduceError,
    ProducerClosedError,
    QueueFullError,
    RequestTimeoutError,
)
from system_under_test.client.group_consumer import GroupConsumer
from system_under_test.client.offset_store import ZooKeeperOffsetStore
from system_under_test.client.producer import Partitioner, Producer
from system_under_test.errors import BrokerError, ErrorCode

__all__ = [
    "AdminClient",
    "BrokerDescription",
    "BrokerError",
    "BrokerUnavailableError",
    "ClientConfigError",
    "ClientError",
    "ConnectionLostError",
    "ConsumedRecord",
    "Consumer",
    "CorruptResponseError",
    "ErrorCode",
    "FetchResult",
    "GroupConsumer",
    "NoOffsetForPartitionError",
    "OffsetCommitError",
    "OffsetStoreError",
    "PartitionDescription",
    "Partitioner",
    "ProduceError",
    "Producer",
    "ProducerClosedError",
    "QueueFullError",
    "RecordMetadata",
    "RequestTimeoutError",
    "SendFuture",
    "TopicDescription",
    "ZooKeeperOffsetStore",
    "parse_bootstrap",
]
