"""A case's cause in words and on the timeline: the SUT events results.json ties to each
lost, diverged or reordered write (`checkers.causes`, docs/results.md)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from squall.report.timeline import Mark

UNEXPLAINED = "not explained"
LOST_LANE = "lost writes"
"""The timeline's lane for where lost writes were acknowledged."""


def cause_text(case: Any) -> str | None:
    """The sentence of a case's cause, or that no event explains it; None: the case carries
    neither (a type without causes, or an older results.json)."""
    if not isinstance(case, Mapping):
        return None
    cause = case.get("cause")
    if isinstance(cause, Mapping) and isinstance(cause.get("text"), str):
        return str(cause["text"])
    reason = case.get("no_cause")
    return f"{UNEXPLAINED}: {reason}" if isinstance(reason, str) else None


def cause_lead(cases: Sequence[Any]) -> str | None:
    """The cause an anomaly type's line leads with: its first explained case's, else that
    no event explains it (None: no case carries a cause)."""
    texts = [t for t in (cause_text(c) for c in cases) if t is not None]
    explained = [t for t in texts if not t.startswith(UNEXPLAINED)]
    return explained[0] if explained else (texts[0] if texts else None)


def cause_lines(cause: Mapping[str, Any]) -> str | None:
    """A cause's events by kind and history line, short (`truncation line 901, ...`)."""
    events = [e for e in cause.get("events") or [] if isinstance(e, Mapping)]
    shown = [f"{e.get('kind')} line {e.get('line')}" for e in events]
    return ", ".join(shown) or None


def cause_summary(cases: Sequence[Any]) -> str | None:
    """One line for an anomaly type: the cause of its first explained case, and how many of
    the cases shown have another cause or none (None: no case carries a cause)."""
    texts = [t for t in (cause_text(c) for c in cases) if t is not None]
    first = cause_lead(cases)
    if first is None:
        return None
    explained = [t for t in texts if not t.startswith(UNEXPLAINED)]
    others = Counter(t for t in texts if t != first)
    unexplained = sum(n for t, n in others.items() if t.startswith(UNEXPLAINED))
    rest = sum(others.values()) - unexplained
    notes = []
    if rest:
        notes.append(f"{rest} {'has' if rest == 1 else 'have'} another cause")
    if unexplained and explained:
        notes.append(f"{unexplained} no event explains")
    return first + (f" (of the {len(texts)} cases shown, {', '.join(notes)})" if notes else "")


def anomaly_marks(results: Mapping[str, Any] | None) -> list[Mark]:
    """Timeline marks of the sampled cases with a cause: where each lost write was
    acknowledged (`acknowledged`, on the `LOST_LANE`, at the case's `time`) and where it was
    lost (`lost`, on the node of its cause's first truncation or election, at its time); one
    mark per place, whatever the number of cases there."""
    marks: dict[tuple[str, str, float, str | None], Mark] = {}
    for case in _cases(results):
        cause = case.get("cause")
        if not isinstance(cause, Mapping):
            continue
        events = [e for e in cause.get("events") or [] if isinstance(e, Mapping)]
        key = None if case.get("key") is None else str(case["key"])
        acked = case.get("time")
        if isinstance(acked, int) and not isinstance(acked, bool):
            at = round(acked / 1e9, 2)
            marks.setdefault(
                ("acknowledged", LOST_LANE, at, key), Mark("acknowledged", LOST_LANE, at, key)
            )
        lost = next(
            (e for e in events if e.get("kind") == "truncation"), events[0] if events else None
        )
        if lost is not None and isinstance(lost.get("node"), str) and _number(lost.get("time_s")):
            at = round(float(lost["time_s"]), 2)
            node = str(lost["node"])
            marks.setdefault(("lost", node, at, key), Mark("lost", node, at, key))
    return list(marks.values())


def _cases(results: Mapping[str, Any] | None) -> Iterable[Mapping[str, Any]]:
    checkers = results.get("checkers") if isinstance(results, Mapping) else None
    for section in (checkers or {}).values():
        if not isinstance(section, Mapping):
            continue
        for group in ("anomalies", "expected"):
            for cases in (section.get(group) or {}).values():
                if isinstance(cases, list):
                    yield from (c for c in cases if isinstance(c, Mapping))


def _number(item: Any) -> bool:
    return isinstance(item, int | float) and not isinstance(item, bool)
