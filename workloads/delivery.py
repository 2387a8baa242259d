"""DeliveryFuture: a `SendFuture` that a client's delivery callback completes, for the client
libraries whose sends report through callbacks (librdkafka, kafka-python)."""

from __future__ import annotations

import threading
from collections.abc import Callable

from workloads.client import SendFuture, SendResult


class DeliveryFuture:
    """The outcome of one send, set once by whichever thread learns it."""

    __slots__ = ("_callbacks", "_done", "_error", "_lock", "_result")

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._done = threading.Event()
        self._result: SendResult | None = None
        self._error: BaseException | None = None
        self._callbacks: list[Callable[[SendFuture], None]] = []

    def succeed(self, result: SendResult) -> None:
        self._complete(result, None)

    def fail(self, error: BaseException) -> None:
        self._complete(None, error)

    def _complete(self, result: SendResult | None, error: BaseException | None) -> None:
        with self._lock:
            if self._done.is_set():
                return
            self._result, self._error = result, error
            self._done.set()
            callbacks, self._callbacks = self._callbacks, []
        for fn in callbacks:
            fn(self)

    def result(self, timeout_s: float | None = None) -> SendResult:
        if not self._done.wait(timeout_s):
            raise TimeoutError(f"no outcome of the send within {timeout_s} s")
        if self._error is not None:
            raise self._error
        assert self._result is not None
        return self._result

    def add_callback(self, fn: Callable[[SendFuture], None]) -> None:
        with self._lock:
            if not self._done.is_set():
                self._callbacks.append(fn)
                return
        fn(self)
