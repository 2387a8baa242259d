"""Kafka's error codes, as the Kafka-protocol clients report them: which of a broker's
answers prove that nothing was written (kafka-python's sends; librdkafka may resend after any
of them, `workloads.confluent_client`), and which commits were refused whole.

A client that retries hides its attempts: its final error may follow an attempt that timed
out and landed. So an error is definite only when the client made a single attempt (no
retries) and the broker answered it with a code it only ever returns before appending, or
when the client says the record never left it.
"""

from __future__ import annotations

REFUSED_BEFORE_APPEND: frozenset[int] = frozenset(
    {
        2,  # CORRUPT_MESSAGE
        3,  # UNKNOWN_TOPIC_OR_PARTITION
        5,  # LEADER_NOT_AVAILABLE
        10,  # MESSAGE_TOO_LARGE
        17,  # INVALID_TOPIC_EXCEPTION
        18,  # RECORD_LIST_TOO_LARGE
        19,  # NOT_ENOUGH_REPLICAS
        21,  # INVALID_REQUIRED_ACKS
        32,  # INVALID_TIMESTAMP
        35,  # UNSUPPORTED_VERSION
        42,  # INVALID_REQUEST
        74,  # FENCED_LEADER_EPOCH
        75,  # UNKNOWN_LEADER_EPOCH
        76,  # UNSUPPORTED_COMPRESSION_TYPE
        87,  # INVALID_RECORD
    }
)
"""Produce errors a broker returns only before appending. NOT_LEADER_FOR_PARTITION (6) is
absent on purpose: a leader deposed while an acks=-1 produce waits answers with it after the
append; so are REQUEST_TIMED_OUT (7) and NOT_ENOUGH_REPLICAS_AFTER_APPEND (20)."""

COMMIT_REFUSED: frozenset[int] = frozenset(
    {
        12,  # OFFSET_METADATA_TOO_LARGE
        22,  # ILLEGAL_GENERATION
        25,  # UNKNOWN_MEMBER_ID
        28,  # INVALID_COMMIT_OFFSET_SIZE
    }
)
"""OffsetCommit errors a coordinator returns without keeping any of the request's offsets."""


def send_definite(code: int, *, retries: int) -> bool:
    """Whether a send that failed with broker error `code` certainly wrote nothing."""
    return retries == 0 and code in REFUSED_BEFORE_APPEND
