"""Doing one thing on many nodes at once, and keeping every node's failure."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import TypeVar

T = TypeVar("T")


def on_each_node(
    names: Sequence[str], action: Callable[[str], T]
) -> tuple[dict[str, T], dict[str, BaseException]]:
    """Run action(name) for every name in parallel, as Jepsen's real-pmap does, so that a
    fault hits its nodes at nearly the same moment; (results, failures) by node name.

    Every node is tried: one node's failure never stops the others.
    """
    results: dict[str, T] = {}
    failures: dict[str, BaseException] = {}
    if not names:
        return results, failures
    with ThreadPoolExecutor(max_workers=len(names), thread_name_prefix="on-each-node") as pool:
        futures = {name: pool.submit(action, name) for name in dict.fromkeys(names)}
        for name, future in futures.items():
            try:
                results[name] = future.result()
            except Exception as err:
                failures[name] = err
    return results, failures
