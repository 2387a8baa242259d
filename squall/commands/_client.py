"""What the commands that talk to brokers as a client share: --bootstrap, --acks, and
turning the client's failures into clear messages and exit codes."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import typer

from squall.commands._common import fail
from squall.commands.choices import Acks
from squall.exit_codes import ExitCode
from system_under_test.client.exceptions import (
    ClientConfigError,
    ClientError,
    NoOffsetForPartitionError,
)
from system_under_test.config import ConfigError
from system_under_test.errors import BrokerError

BootstrapOption = typer.Option(
    "127.0.0.1:9092",
    "--bootstrap",
    "--bootstrap-server",
    metavar="HOST:PORT[,...]",
    help="Brokers to connect to.",
)

AcksOption = typer.Option(
    Acks.LEADER,
    "--acks",
    case_sensitive=False,
    metavar="-1|0|1|all",
    help="Replicas that must have a record (-1 and all: the ISR).",
)


@contextmanager
def client_errors() -> Iterator[None]:
    """Bad input exits USAGE; brokers that cannot be reached or fail exit INFRASTRUCTURE."""
    try:
        yield
    except (ConfigError, ClientConfigError, NoOffsetForPartitionError) as err:
        fail(str(err), ExitCode.USAGE)
    except ClientError as err:
        fail(str(err), ExitCode.INFRASTRUCTURE)
    except BrokerError as err:
        fail(str(err), ExitCode.INFRASTRUCTURE if err.retriable else ExitCode.USAGE)
    except (ConnectionError, TimeoutError, OSError) as err:
        fail(str(err), ExitCode.INFRASTRUCTURE)
