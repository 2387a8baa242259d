"""An idempotent producer's identity: its producer id and epoch, and the next sequence number
of each partition (what Kafka's producer keeps for ``enable.idempotence``).

The id comes from InitProducerId (any broker hands one out). Each batch takes the next
sequence numbers of its partition once, when it is first sent, and keeps them through every
retry, so that a broker that already wrote it answers with the offsets it wrote it at instead
of writing it twice. A batch that finally fails may leave a gap in its partition's sequence
that no later batch could fill: the producer then takes a new producer id, whose sequences
start again at 0 (Kafka 2.4's producer does the same; later ones bump the epoch, KIP-360).
Thread-safe.
"""

from __future__ import annotations

import threading
import time

from system_under_test.client.exceptions import ClientError
from system_under_test.client.metadata import ClusterMetadata
from system_under_test.errors import BrokerError, ErrorCode
from system_under_test.kafka.init_producer_id import InitProducerIdRequest, InitProducerIdResponse

TopicPartition = tuple[str, int]
Identity = tuple[int, int]
"""A producer id and its epoch."""
_TRANSACTION_TIMEOUT_MS = 60_000
"""Sent with InitProducerId as Kafka's producer does; without a transactional id unused."""


class ProducerIdentity:
    """The producer id, epoch and per-partition sequences of one idempotent producer."""

    def __init__(self, metadata: ClusterMetadata, *, timeout_s: float, backoff_s: float) -> None:
        self._metadata = metadata
        self._timeout_s = timeout_s
        self._backoff_s = backoff_s
        self._lock = threading.Lock()
        self._identity: Identity | None = None
        self._sequences: dict[TopicPartition, int] = {}

    @property
    def current(self) -> Identity | None:
        """The producer id and epoch, once known; None until then and after a reset."""
        return self._identity

    def ensure(self) -> Identity:
        """The producer id and epoch, asking a broker for them if none is known (retrying
        what may pass for up to the request timeout). Raises BrokerError or ClientError."""
        known = self._identity
        if known is not None:
            return known
        deadline = time.monotonic() + self._timeout_s
        while True:
            try:
                response = self._metadata.any_request(
                    InitProducerIdRequest(
                        transactional_id=None, transaction_timeout_ms=_TRANSACTION_TIMEOUT_MS
                    ),
                    InitProducerIdResponse,
                )
                code = ErrorCode.from_wire(response.error_code)
                if code is ErrorCode.NONE:
                    identity = (response.producer_id, response.producer_epoch)
                    with self._lock:
                        if self._identity is None:
                            self._identity = identity
                            self._sequences.clear()
                        return self._identity
                error: BrokerError | ClientError = BrokerError.for_code(
                    code, "InitProducerId refused"
                )
                if not code.retriable:
                    raise error
            except ClientError as err:
                error = err
            if time.monotonic() + self._backoff_s >= deadline:
                raise error
            time.sleep(self._backoff_s)

    def take(self, tp: TopicPartition, count: int) -> tuple[int, int, int]:
        """(producer id, epoch, base sequence) for a batch of `count` records of `tp`, whose
        sequences are then the partition's next. The identity must be known (ensure())."""
        with self._lock:
            if self._identity is None:
                raise ClientError("the idempotent producer has no producer id yet")
            producer_id, epoch = self._identity
            base = self._sequences.get(tp, 0)
            self._sequences[tp] = (base + count) & 0x7FFF_FFFF
            return producer_id, epoch, base

    def reset(self, identity: Identity) -> None:
        """Forget `identity` (a batch of it failed for good): the next ensure() asks for a
        new id, whose sequences start at 0. A reset of an identity already replaced is
        ignored."""
        with self._lock:
            if self._identity == identity:
                self._identity = None
                self._sequences.clear()
