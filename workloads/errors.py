"""The exceptions raised by `workloads`, one class per kind of problem."""

from __future__ import annotations


class WorkloadError(Exception):
    """Base class of every error raised by the `workloads` package."""


class WorkloadSpecError(WorkloadError, ValueError):
    """A workload specification is invalid; the message names the field and a valid value."""


class TopicSetupError(WorkloadError):
    """The workload's topic could not be created or did not get leaders in time."""


class WorkloadFailedError(WorkloadError):
    """A worker thread hit an unexpected error (a bug or a closed history), so the run stopped.

    The history is still valid: every operation left in flight was completed as `info`.
    """


class ClientBusyError(WorkloadError, RuntimeError):
    """A client invoked a second operation while its first was still in flight (a bug)."""
