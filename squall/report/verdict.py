"""A verdict in words: what results.json says about the configuration that was tested.

One sentence or two, the same in the terminal, the campaign summary and ``make demo``:
INVALID names the acknowledged writes lost (each once, results.json's `summary`), then the
anomaly types with their counts, and what the configuration promised; a valid run with
losses the configuration allows names them the same way and the allowance; a clean run says
what it survived.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any


def leader_elections(history: Path) -> int | None:
    """How many leader elections the SUT recorded in a history (None: no history)."""
    events = history_events(history)
    return None if events is None else events[0]


def history_events(history: Path) -> tuple[int, list[dict[str, Any]]] | None:
    """In one pass over a history: its leader elections and its nemesis operations (None:
    it cannot be read)."""
    elections = 0
    nemesis: list[dict[str, Any]] = []
    try:
        with history.open(encoding="utf-8") as lines:
            for line in lines:
                if '"leader-election"' in line or '"nemesis"' in line:
                    op = json.loads(line)
                    if op.get("process") == "nemesis":
                        nemesis.append(op)
                    elif op.get("f") == "leader-election":
                        elections += 1
    except (OSError, ValueError):
        return None
    return elections, nemesis


def type_counts(results: Mapping[str, Any], key: str) -> dict[str, int]:
    """Cases per anomaly type under `key` (`counts` or `expected_counts`), summed over the
    checkers; types with none left out."""
    counts: dict[str, int] = {}
    for section in (results.get("checkers") or {}).values():
        for name, n in (section.get(key) or {}).items():
            if n:
                counts[name] = counts.get(name, 0) + int(n)
    return counts


def lost_counts(results: Mapping[str, Any]) -> tuple[int, int] | None:
    """(acknowledged writes lost, of them allowed) from `summary`; None for results that
    do not count them (older than `summary`)."""
    summary = results.get("summary")
    if not isinstance(summary, Mapping):
        return None
    return int(summary.get("acknowledged_lost") or 0), int(summary.get("allowed_lost") or 0)


def describe_lost(results: Mapping[str, Any]) -> str | None:
    """ "761 acknowledged writes lost (761 allowed)", "1 acknowledged write lost", or None
    when none was (or they were not counted)."""
    counted = lost_counts(results)
    if counted is None or not counted[0]:
        return None
    lost, allowed = counted
    writes = "write" if lost == 1 else "writes"
    text = f"{lost:,} acknowledged {writes} lost"
    if allowed and allowed < lost:
        text += f" ({allowed:,} of them allowed)"
    return text


def _shown_as(counts: Mapping[str, int], names: Sequence[str]) -> str:
    """`names` with their counts: "lost-write 761, unseen 761"."""
    return ", ".join(f"{name} {counts[name]:,}" if name in counts else name for name in names)


def _configuration(results: Mapping[str, Any]) -> str:
    test = (results.get("config") or {}).get("test") or {}
    if test.get("source") is None:
        return "the history's configuration is unknown (no test.json)"
    acks = test.get("acks")
    parts = [
        f"acks={'all' if acks == -1 else acks}",
        f"RF {test.get('replication_factor')}",
        f"min.insync {test.get('min_insync_replicas')}",
        "unclean election on" if test.get("unclean_leader_election") else "unclean election off",
    ]
    return ", ".join(parts)


def explain(results: Mapping[str, Any], *, elections: int | None = None) -> str:
    """What the verdict of ``results`` means, in a sentence or two; faults asked for but not
    applied are named beside it."""
    text = _explain(results, elections)
    needs: Mapping[str, str] = (results.get("faults") or {}).get("needs") or {}
    if needs:
        listing = ", ".join(f"{name} (needs {need})" for name, need in sorted(needs.items()))
        text += f" Asked for but not applied: {listing}."
    return text


def _explain(results: Mapping[str, Any], elections: int | None) -> str:
    valid = results.get("valid")
    config = _configuration(results)
    if results.get("interrupted"):
        return (
            "INTERRUPTED: the run was stopped before its time limit; what it recorded "
            + (
                "shows anomalies: " + ", ".join(results.get("anomaly_types") or [])
                if valid is False
                else "cannot vouch for the configuration"
            )
            + f" ({config})."
        )
    promised = bool(((results.get("config") or {}).get("test") or {}).get("promises_no_loss"))
    moved = f" through {elections} leader elections" if elections else ""
    if valid is False:
        found: Sequence[str] = results.get("anomaly_types") or []
        promise = (
            "it promised that no acknowledged write is lost"
            if promised
            else "these are not losses it allows"
        )
        lost = describe_lost(results)
        shown = _shown_as(type_counts(results, "counts"), found)
        what = f"{lost}; cases by type: {shown}" if lost else shown
        return f"INVALID: {what} under {config}; {promise}."
    if valid != True:  # noqa: E712 - "unknown" is a string
        return f"UNKNOWN: the history shows too little to judge ({config})."
    expected: Sequence[str] = results.get("expected_anomaly_types") or []
    if expected:
        allowances = (results.get("config") or {}).get("allowances") or []
        because = f" ({'; '.join(allowances)})" if allowances else ""
        lost = describe_lost(results)
        shown = _shown_as(type_counts(results, "expected_counts"), expected)
        what = f"{lost}; cases by type: {shown}" if lost else shown
        return (
            f"VALID, with losses the configuration allows: {what}{moved} under {config}{because}."
        )
    return f"VALID: every acknowledged write was read back{moved} under {config}."


def nemesis_operations(history: Path) -> list[dict[str, Any]]:
    """The nemesis operations of a history, in order (none when it cannot be read)."""
    events = history_events(history)
    return [] if events is None else events[1]


def describe_faults(test: Mapping[str, Any] | None, applied: Sequence[Mapping[str, Any]]) -> str:
    """What the nemesis did, for the report: the schedule asked for, the scenarios and faults
    applied, and the detectors their durations were drawn around."""
    if test is None:
        return "faults: unknown (no test.json)"
    nemesis = test.get("nemesis")
    if nemesis is None:
        return "faults: none (the nemesis was off)"
    generator = nemesis.get("generator")
    if generator in ("default", "default-with-disks"):
        asked = "the default mix of scenarios"
    elif generator == "default-without-disks":
        asked = "the default mix of scenarios without the storage family"
    elif generator is not None:
        asked = f"generator {json.dumps(generator)}"
    else:
        kinds = ", ".join(sorted(k for k, w in (nemesis.get("faults") or {}).items() if w))
        asked = f"{kinds} faults"
    scenarios = sorted(
        {str(op["value"]["scenario"]) for op in applied if (op.get("value") or {}).get("scenario")}
    )
    done = f"; {len(applied)} nemesis operations"
    if scenarios:
        done += f" in {len(scenarios)} scenarios ({', '.join(scenarios)})"
    detectors = nemesis.get("detectors") or {}
    timing = ""
    if detectors:
        timing = (
            f"; profile {test.get('profile', '?')}: session "
            f"{detectors.get('session_timeout_s', 0):g} s, lag "
            f"{detectors.get('replica_lag_s', 0):g} s"
        )
    return f"faults: {asked}{done}{timing}"


def _details(results: Mapping[str, Any], checker: str) -> Mapping[str, Any]:
    """A checker's `details` in results.json (empty where it has none)."""
    section = results.get("checkers", {}).get(checker, {})
    details = section.get("details", {}) if isinstance(section, Mapping) else {}
    return details if isinstance(details, Mapping) else {}


def group_summary(results: Mapping[str, Any]) -> str | None:
    """What the consumer group went through, in words, from the `generations` checker's
    details (None: no member of a group in the history)."""
    details = _details(results, "generations")
    if not details.get("generations"):
        return None
    text = (
        f"consumer group: {details['generations']:,} generations, "
        f"{details.get('revocations', 0):,} rebalances of a member (partitions revoked), "
        f"{details.get('refused_commits', 0):,} commits refused"
    )
    faults = details.get("member_faults") or {}
    counts = faults.get("counts", {}) if isinstance(faults, Mapping) else {}
    slept = [float(s) for s in faults.get("paused_s", [])] if isinstance(faults, Mapping) else []
    done = []
    if counts.get("pause-member"):
        span = f" ({min(slept):.1f}-{max(slept):.1f} s each)" if slept else ""
        done.append(f"{counts['pause-member']} paused{span}")
    for f, verb in (("kill-member", "killed"), ("leave-member", "made to leave")):
        if counts.get(f):
            done.append(f"{counts[f]} {verb}")
    return text + (f"; members faulted: {', '.join(done)}" if done else "")


def replica_reads_summary(results: Mapping[str, Any]) -> str | None:
    """What the replica reads covered, in words (None: the history has none)."""
    details = _details(results, "replicas")
    if not details.get("replica_reads"):
        return None
    text = (
        f"replica reads: {details.get('replicas', 0)} replicas of {details.get('keys', 0)} "
        "keys read off their disks after the run"
    )
    unreadable = details.get("unreadable_replicas") or []
    if unreadable:
        text += f"; {len(unreadable)} could not be read"
    diverged = results["checkers"]["replicas"].get("counts", {}).get("replica-divergence", 0)
    return text + (
        f"; {diverged} disagree below the high watermark" if diverged else "; they agree"
    )
