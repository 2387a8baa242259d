"""The closed sets of values that CLI options take, as enums typer turns into choices.

Click rejects any other value with a message naming the option and the valid values, and
``squall`` exits with ExitCode.USAGE (2).
"""

from __future__ import annotations

from enum import StrEnum
from typing import Literal


class Acks(StrEnum):
    """A producer's ``acks``, in every spelling Kafka's tools accept (``all`` is ``-1``)."""

    NONE = "0"
    LEADER = "1"
    ALL = "-1"
    ALL_BY_NAME = "all"

    def __int__(self) -> int:
        """The number the client takes: 0, 1 or -1."""
        return -1 if self in (Acks.ALL, Acks.ALL_BY_NAME) else int(self.value)


class ProducerMode(StrEnum):
    """sync: one request in flight at a time; async: batched, as Kafka's old producer."""

    SYNC = "sync"
    ASYNC = "async"

    @property
    def literal(self) -> Literal["sync", "async"]:
        """The mode as the client's ``Producer`` types it."""
        return "sync" if self is ProducerMode.SYNC else "async"


class LoaderName(StrEnum):
    """How ``squall check`` turns history.jsonl into Parquet (checkers.config.Loader)."""

    AUTO = "auto"
    EXACT = "exact"

    @property
    def literal(self) -> Literal["auto", "exact"]:
        """The loader as ``checkers.CheckConfig`` types it."""
        return "auto" if self is LoaderName.AUTO else "exact"


class ExpectedLossName(StrEnum):
    """A loss ``squall check --expect-loss`` reports as expected (checkers.config.ExpectedLoss)."""

    ACKS0 = "acks0"
    ACKS1 = "acks1"
    UNCLEAN = "unclean"
    RETRIES = "retries"

    @property
    def literal(self) -> Literal["acks0", "acks1", "unclean", "retries"]:
        """The loss as ``checkers.CheckConfig`` types it."""
        literals: dict[ExpectedLossName, Literal["acks0", "acks1", "unclean", "retries"]] = {
            ExpectedLossName.ACKS0: "acks0",
            ExpectedLossName.ACKS1: "acks1",
            ExpectedLossName.UNCLEAN: "unclean",
            ExpectedLossName.RETRIES: "retries",
        }
        return literals[self]


class RuntimeName(StrEnum):
    """Where a cluster's nodes run (squall.cluster.runtimes.RUNTIMES)."""

    DOCKER = "docker"
    SSH = "ssh"
    LOCAL = "local"
    EXTERNAL = "external"
