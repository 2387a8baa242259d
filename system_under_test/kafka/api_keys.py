"""Kafka's API keys: the int16 that opens every request header and names its API."""

from __future__ import annotations

from enum import IntEnum


class ApiKey(IntEnum):
    """The API keys of Kafka's protocol that squall's broker implements or will, by number."""

    PRODUCE = 0
    FETCH = 1
    LIST_OFFSETS = 2
    METADATA = 3
    LEADER_AND_ISR = 4
    STOP_REPLICA = 5
    UPDATE_METADATA = 6
    CONTROLLED_SHUTDOWN = 7
    OFFSET_COMMIT = 8
    OFFSET_FETCH = 9
    FIND_COORDINATOR = 10
    JOIN_GROUP = 11
    HEARTBEAT = 12
    LEAVE_GROUP = 13
    SYNC_GROUP = 14
    API_VERSIONS = 18
    CREATE_TOPICS = 19
    INIT_PRODUCER_ID = 22
    OFFSET_FOR_LEADER_EPOCH = 23
