"""The squall client library: Producer, Consumer and AdminClient over blocking sockets.

Usable from scripts and threads. Every name a user needs is importable from here::

    from system_under_test.client import Producer, Consumer, AdminClient, ProduceError
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
    ProduceError,
    ProducerClosedError,
    QueueFullError,
    RequestTimeoutError,
)
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
    "NoOffsetForPartitionError",
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
    "parse_bootstrap",
]
