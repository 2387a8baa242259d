"""InitProducerId (key 22), versions 0-1: a producer id and epoch for an idempotent producer.

A null transactional id asks for an idempotent (non-transactional) producer id. Version 1
differs only in when a throttled response is sent.
"""

from __future__ import annotations

from typing import ClassVar

from system_under_test.kafka.api_keys import ApiKey
from system_under_test.kafka.schema import INT16, INT32, INT64, STRING, Body, field, struct


@struct
class InitProducerIdRequest(Body):
    API_KEY: ClassVar[int] = ApiKey.INIT_PRODUCER_ID
    VERSIONS: ClassVar[tuple[int, int]] = (0, 1)

    transactional_id: str | None = field(STRING, nullable="0+")
    transaction_timeout_ms: int = field(INT32)


@struct
class InitProducerIdResponse(Body):
    API_KEY: ClassVar[int] = ApiKey.INIT_PRODUCER_ID
    VERSIONS: ClassVar[tuple[int, int]] = (0, 1)

    throttle_time_ms: int = field(INT32)
    error_code: int = field(INT16)
    producer_id: int = field(INT64, default=-1)
    producer_epoch: int = field(INT16)
