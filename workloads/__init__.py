"""Workloads: generators and clients that turn a test into operations in a history.

`QueueWorkload` is Jepsen's Kafka queue workload against squall's replicated log; a
`WorkloadSpec` says what it does. It drives the system through the client protocol of
`workloads.client`; `SquallClientFactory` (squall's own client) is the default
implementation. The smaller pieces (recorder, values, rate limiter, counters, final read)
are importable for other workloads.
"""

from workloads.acknowledged import AcknowledgedSends
from workloads.client import ClientFactory, OperationError
from workloads.consumer_worker import ConsumerWorker
from workloads.counters import CounterSnapshot, WorkloadCounters
from workloads.errors import (
    ClientBusyError,
    TopicSetupError,
    WorkloadError,
    WorkloadFailedError,
    WorkloadSpecError,
)
from workloads.final_read import FinalRead, FinalReadResult
from workloads.leaders import LeaderView
from workloads.outcomes import ErrorOutcome, describe_error
from workloads.producer_worker import ProducerWorker
from workloads.queue_workload import QueueWorkload, WorkloadRunSummary
from workloads.rate import RateLimiter
from workloads.recorder import (
    Client,
    HistorySink,
    OperationRecorder,
    PendingOp,
    ProcessNumbers,
    poll_value,
)
from workloads.spec import OpMix, WorkloadSpec, key_name, partition_of
from workloads.squall_client import SquallClientFactory
from workloads.topic_setup import ensure_topic
from workloads.values import ValueSequence, decode_value, encode_value

__all__ = [
    "AcknowledgedSends",
    "Client",
    "ClientBusyError",
    "ClientFactory",
    "ConsumerWorker",
    "CounterSnapshot",
    "ErrorOutcome",
    "FinalRead",
    "FinalReadResult",
    "HistorySink",
    "LeaderView",
    "OpMix",
    "OperationError",
    "OperationRecorder",
    "PendingOp",
    "ProcessNumbers",
    "ProducerWorker",
    "QueueWorkload",
    "RateLimiter",
    "SquallClientFactory",
    "TopicSetupError",
    "ValueSequence",
    "WorkloadCounters",
    "WorkloadError",
    "WorkloadFailedError",
    "WorkloadRunSummary",
    "WorkloadSpec",
    "WorkloadSpecError",
    "decode_value",
    "describe_error",
    "encode_value",
    "ensure_topic",
    "key_name",
    "partition_of",
    "poll_value",
]
