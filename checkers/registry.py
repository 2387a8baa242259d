"""The checkers a check runs, in order, and their composition (Jepsen's `checker/compose`).

    from checkers.registry import REGISTRY
    REGISTRY.register(MyChecker())   # its section follows the others in results.json

`check_loaded` composes `REGISTRY` unless it is given checkers of its own. Composing runs
each checker over the one `CheckContext` and holds it to the protocol: its report carries
its name, and only the anomaly types it declared.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator

from checkers.checker import CheckContext, Checker
from checkers.conformance import ConformanceChecker
from checkers.consumer_anchors import ConsumerAnchorsChecker
from checkers.consumer_groups import ConsumerGroupsChecker
from checkers.delivery import DeliveryChecker
from checkers.errors import CheckerDefinitionError
from checkers.generations import GenerationsChecker
from checkers.offsets import OffsetsChecker
from checkers.order import OrderChecker
from checkers.replicas import ReplicasChecker
from checkers.results import CheckerReport
from checkers.unclean import UncleanChecker


class CheckerRegistry:
    """Checkers by unique name, in the order they run and appear in results.json."""

    def __init__(self, checkers: Iterable[Checker] = ()) -> None:
        self._checkers: dict[str, Checker] = {}
        for checker in checkers:
            self.register(checker)

    def register(self, checker: Checker) -> Checker:
        """Add `checker` after the others; returns it."""
        if checker.name in self._checkers:
            raise CheckerDefinitionError(
                f"a checker named {checker.name!r} is already registered "
                f"({self._checkers[checker.name]!r}); unregister it first or name yours otherwise"
            )
        self._checkers[checker.name] = checker
        return checker

    def unregister(self, name: str) -> Checker:
        """Remove the checker named `name`; returns it."""
        try:
            return self._checkers.pop(name)
        except KeyError:
            raise CheckerDefinitionError(
                f"no checker named {name!r} is registered; registered: {list(self._checkers)}"
            ) from None

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(self._checkers)

    def __iter__(self) -> Iterator[Checker]:
        return iter(tuple(self._checkers.values()))

    def __len__(self) -> int:
        return len(self._checkers)


def default_checkers() -> tuple[Checker, ...]:
    """squall's checkers, in the order of results.json (docs/results.md)."""
    return (
        OffsetsChecker(),
        DeliveryChecker(),
        OrderChecker(),
        ConsumerGroupsChecker(),
        ConsumerAnchorsChecker(),
        GenerationsChecker(),
        UncleanChecker(),
        ConformanceChecker(),
        ReplicasChecker(),
    )


REGISTRY = CheckerRegistry(default_checkers())
"""The checkers `check_loaded` composes by default."""


def compose(checkers: Iterable[Checker], context: CheckContext) -> list[CheckerReport]:
    """Each checker's report, in order; raises `CheckerDefinitionError` for a checker that
    shares another's name, or reports under another name or undeclared anomaly types."""
    reports: list[CheckerReport] = []
    for checker in CheckerRegistry(checkers):
        report = checker.check(context)
        _hold_to_protocol(checker, report)
        reports.append(report)
    return reports


def _hold_to_protocol(checker: Checker, report: CheckerReport) -> None:
    named = {report.name, *(item.checker for item in report.findings)}
    if named != {checker.name}:
        raise CheckerDefinitionError(
            f"checker {checker.name!r} reported under {sorted(named)}; name its report and "
            f"every finding {checker.name!r}, or its findings are lost"
        )
    undeclared = {name for item in report.findings for name in item.anomalies} - set(
        checker.anomalies
    )
    if undeclared:
        raise CheckerDefinitionError(
            f"checker {checker.name!r} reported anomaly types {sorted(undeclared)} it does "
            f"not declare ({list(checker.anomalies)}); add them to its `anomalies`"
        )
