"""Workloads: generators and clients that turn a test into operations in a history.

`QueueWorkload` is Jepsen's Kafka queue workload against squall's replicated log; a
`WorkloadSpec` says what it does. The smaller pieces (recorder, values, rate limiter,
counters, final read) are importable for other workloads.
"""

from workloads.acknowledged import AcknowledgedSends
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
from workloads.topic_setup import ensure_topic
from workloads.values import ValueSequence, decode_value, encode_value

__all__ = [
    "AcknowledgedSends",
    "Client",
    "ClientBusyError",
    "ConsumerWorker",
    "CounterSnapshot",
    "ErrorOutcome",
    "FinalRead",
    "FinalReadResult",
    "HistorySink",
    "LeaderView",
    "OpMix",
    "OperationRecorder",
    "PendingOp",
    "ProcessNumbers",
    "ProducerWorker",
    "QueueWorkload",
    "RateLimiter",
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
