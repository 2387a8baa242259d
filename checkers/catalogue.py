"""Every anomaly type the checkers report, explained: in one sentence, by the fields of its
cases, by what allows it, and by a page of its own (`docs/anomalies/<name>.md`).

`describe_case` turns one sample case of results.json into an explanation a program can
read and a person can follow: its key, the offsets it concerns, the history.jsonl line
numbers of the operations it names, and one sentence. A case names operations by their
history `index` (0-based, dense, in file order), so the operation with index `i` is on line
`i + 1` of history.jsonl (`history_line`). Fields called `index` or `max_read_index` in a
case are dense offset indices, not history indices, and give no line. For a history
imported from a Jepsen `history.edn`, the line is the op's position among the file's op
maps (from 1), which is its line in the .edn only when the file holds one op per line.

Standard library only: it runs on the driver over the sampled cases, without Spark.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any, Literal, TypeGuard, TypeVar

Allowance = Literal["never", "configuration", "always"]
_T = TypeVar("_T")

SINGLE_OPERATION_FIELDS = (
    "writer",
    "invoked",
    "reader",
    "assign",
    "commit",
    "anchor_commit",
    "election",
    "event",
    "last_event",
    "earlier_event",
    "op",
    "fault",
    "healed",
    "read",
)
"""The case fields that name one history operation (or SUT event) by index."""
OPERATION_FIELDS = (*SINGLE_OPERATION_FIELDS, "ops", "sends")
"""Every case field that names history operations by index (`sends`: objects with
`invoke_index` and `index`)."""

_DENSE = (
    "`index` and `max_read_index` are dense indices of the key's offsets (0 is its lowest "
    "offset seen), not history indices"
)
_PLACED = (
    "`placement` says where the offset sits in the key's log as the final read and the "
    "replicas' final reads held it: `prefix` (before its first record), `middle` (a hole), "
    "`tail` (after its last) or `whole-log` (they held nothing)"
)
_STEP = "`delta` is the step in dense indices (1 would be the next record)"


@dataclass(frozen=True)
class AnomalyInfo:
    """One anomaly type: what it means, what in a case shows it, and what allows it.

    `allowance`: `never` (no configuration allows it), `configuration` (expected when the
    tested configuration allows it, see `allowed_by`) or `always` (never makes a history
    invalid). `fields`: the fields its cases may carry (absent when null);
    `operation_fields`: those naming history operations.
    """

    name: str
    checker: str
    meaning: str
    shows: str
    allowed_by: str
    allowance: Allowance
    doc: str
    fields: tuple[str, ...]
    operation_fields: tuple[str, ...]

    @property
    def checked_fields(self) -> tuple[str, ...]:
        """The fields its checker fills (`expected_because` comes with the allowance, `cause`
        and `no_cause` from the SUT's events, `checkers.causes`)."""
        return tuple(name for name in self.fields if name not in _ADDED_FIELDS)

    def as_dict(self) -> dict[str, Any]:
        """As JSON-ready data (tuples become lists)."""
        data = asdict(self)
        data["fields"] = list(self.fields)
        data["operation_fields"] = list(self.operation_fields)
        return data


CAUSED = frozenset(
    {
        "lost-write",
        "unseen",
        "lost-acked-write",
        "at-least-once-violation",
        "inconsistent-offsets",
        "unclean-loss-window",
        "nonmonotonic-poll",
        "nonmonotonic-send",
        "replica-divergence",
    }
)
"""The anomaly types whose cases carry a `cause` (or `no_cause`) from the SUT's events
(`checkers.causes`): losses, divergences and steps back of one key's log."""
_ADDED_FIELDS = ("expected_because", "cause", "no_cause")
_WRITE_FIELDS = ("key", "value", "offset", "writer", "status", "acks", "time")
_BETWEEN_FIELDS = ("key", "process", "ops", "values", "offsets", "delta")
_POWER = (
    "a flush policy that does not fsync before acknowledging (the default), for writes lost "
    "with the power of every replica that held them (with min.insync.replicas=1, of the "
    "ISR of one that acknowledged them)"
)
_LOSSY = f"acks=0 or acks=1; unclean leader election, for writes lost in its window; {_POWER}"
_TRUNCATED = (
    "a loss the configuration allows (acks=0 or acks=1, unclean leader election, or a "
    "power loss under a flush policy that does not fsync before acknowledging) that "
    "truncated the log between the two operations"
)
_BUG = "no configuration: always a bug"


def _info(
    name: str,
    checker: str,
    meaning: str,
    shows: str,
    allowed_by: str,
    allowance: Allowance,
    fields: Sequence[str],
) -> AnomalyInfo:
    return AnomalyInfo(
        name=name,
        checker=checker,
        meaning=meaning,
        shows=shows,
        allowed_by=allowed_by,
        allowance=allowance,
        doc=f"docs/anomalies/{name}.md",
        fields=(*fields, "expected_because", *(("cause", "no_cause") if name in CAUSED else ())),
        operation_fields=tuple(item for item in fields if item in OPERATION_FIELDS),
    )


def _between(
    name: str, meaning: str, shows: str, allowed_by: str, allowance: Allowance
) -> AnomalyInfo:
    extra = ("skipped",) if name == "poll-skip" else ()
    return _info(name, "order", meaning, shows, allowed_by, allowance, (*_BETWEEN_FIELDS, *extra))


def _inside(
    name: str, meaning: str, shows: str, allowed_by: str, allowance: Allowance, status: str
) -> AnomalyInfo:
    fields = ("key", "process", "op", status, "values", "offsets", "delta")
    return _info(name, "order", meaning, shows, allowed_by, allowance, fields)


_CATALOGUE = (
    _info(
        "inconsistent-offsets",
        "offsets",
        "Two or more different values were seen at the same offset of a partition.",
        "`offset` holds every value in `values`; `index` is its dense index. The case names "
        "no operation: find the polls and sends that saw each value at that offset in "
        "history.jsonl.",
        "acks=0 or acks=1, or unclean leader election, when a write at that offset was such "
        "an allowed loss and the next leader reused the offset; unclean leader election, "
        "when the offset was seen holding one value before an unclean election of its "
        "partition and another after it",
        "configuration",
        ("key", "offset", "index", "values"),
    ),
    _info(
        "duplicate",
        "offsets",
        "The same value was seen at more than one offset of a partition, as if it had been "
        "written twice.",
        "`value` sits at every offset in `offsets` (`count` of them); `index` is the dense "
        "index of the first. Only when producer retries are allowed does the case list the "
        "value's send operations, in `sends` (`invoke_index`, `index`: history indices).",
        "producer retries without idempotence (test.json workload.producer_retries > 0, or "
        "--expect-loss retries), when a retry explains the extra offsets; unclean leader "
        "election, when the value was seen at one offset before an unclean election of its "
        "partition and at another after it",
        "configuration",
        ("key", "value", "offsets", "count", "index", "sends"),
    ),
    _info(
        "G1a",
        "delivery",
        "A consumer read a value whose send had failed (an aborted read).",
        "`writer` is the failed send's completion and `reader` the first `ok` poll that "
        "read `value`; `reads` counts the `ok` reads of it (not an index).",
        _BUG,
        "never",
        ("key", "value", "writer", "reader", "reads"),
    ),
    _info(
        "lost-write",
        "delivery",
        "A write known to have happened was never read by any consumer, although consumers "
        "read its partition up to its offset or beyond.",
        "`writer` is the send's completion (absent if it never completed), `offset` where "
        f"the value sat, `status` and `acks` how it was sent; {_DENSE}; {_PLACED}.",
        _LOSSY,
        "configuration",
        (*_WRITE_FIELDS, "index", "max_read_index", "placement"),
    ),
    _info(
        "unseen",
        "delivery",
        "An acknowledged write was never read by any consumer by the end of the test.",
        "`writer` is the send's `ok` completion, `offset` where it was acknowledged "
        "(absent with acks=0), `acks` how it was sent.",
        _LOSSY,
        "configuration",
        _WRITE_FIELDS,
    ),
    _info(
        "lost-acked-write",
        "delivery",
        "A write acknowledged with acks=-1 is missing from its partition's complete final "
        "read, a loss the configuration does not allow.",
        "`writer` is the send's `ok` completion, `offset` where it was acknowledged; "
        "`final_read_to` is the highest offset the final read reached (an offset, not an "
        "index), `log_end` the end of the log it read to (the offset after the last "
        f"record), when the final read recorded one; {_PLACED}.",
        "judged only when the configuration bounds such losses (min.insync.replicas "
        "given, unclean leader election off, replication factor >= 2 or unknown); then "
        f"allowed only by {_POWER}",
        "configuration",
        (*_WRITE_FIELDS, "final_read_to", "log_end", "placement"),
    ),
    _between(
        "poll-skip",
        "A consumer's poll jumped over records: it began more than one record after where "
        "that consumer's previous read of the partition ended.",
        "`ops` are the previous `ok` read and this poll (their completions); `offsets` and "
        f"`values` the two records; {_STEP}, `skipped` the records jumped over.",
        _BUG,
        "never",
    ),
    _between(
        "nonmonotonic-poll",
        "A consumer went backwards: its poll began at or before the record where its "
        "previous read of the partition ended.",
        "`ops` are the previous `ok` read and this poll (their completions); `offsets` and "
        f"`values` the two records; {_STEP}, 0 or less here.",
        _TRUNCATED,
        "configuration",
    ),
    _inside(
        "int-poll-skip",
        "Within one poll, a consumer jumped over records between two consecutive records of "
        "a partition.",
        "`op` is the poll's completion, `type` its completion type; `offsets` and `values` "
        f"the two consecutive records; {_STEP}.",
        _BUG,
        "never",
        "type",
    ),
    _inside(
        "int-nonmonotonic-poll",
        "Within one poll, a consumer got a partition's records out of order: a record at or "
        "before the one just before it.",
        "`op` is the poll's completion, `type` its completion type; `offsets` and `values` "
        f"the two consecutive records; {_STEP}, 0 or less here.",
        _BUG,
        "never",
        "type",
    ),
    _between(
        "nonmonotonic-send",
        "A producer's write landed at or before the position of its previous write to the "
        "same partition.",
        "`ops` are the two send operations (their completions); `values` the two values, "
        "`offsets` the offsets their completions reported (null if none); positions are "
        f"each value's first offset in the log; {_STEP}, 0 or less here.",
        _TRUNCATED,
        "configuration",
    ),
    _inside(
        "int-send-skip",
        "Two consecutive writes of one operation to a partition landed with other records "
        "between them.",
        "`op` is the operation's completion, `status` its completion type; `values` and "
        f"`offsets` the two sends; {_STEP}, more than 1 here.",
        "every configuration: always allowed, since another producer may write between two "
        "sends of one operation",
        "always",
        "status",
    ),
    _inside(
        "int-nonmonotonic-send",
        "Within one operation, a write landed at or before the position of the write sent "
        "just before it to the same partition.",
        "`op` is the operation's completion, `status` its completion type; `values` and "
        f"`offsets` the two sends; {_STEP}, 0 or less here.",
        _BUG,
        "never",
        "status",
    ),
    _info(
        "unclean-loss-window",
        "unclean",
        "A leader elected from outside the in-sync replicas (an unclean election) discarded "
        "committed writes of its partition.",
        "`election` is the SUT's `leader-election` event; `offsets` the first and last lost "
        "offsets, `lost` how many committed values were lost (`lost_values`: up to 5), "
        "`window` the nanoseconds from the first lost acknowledgement (or read, for an "
        "indeterminate write) to the election.",
        "unclean leader election allowed (test.json topic.unclean_leader_election true, or "
        "--expect-loss unclean)",
        "configuration",
        (
            "key",
            "election",
            "time",
            "leader",
            "previous_leader",
            "leader_epoch",
            "isr",
            "offsets",
            "lost",
            "window",
            "lost_values",
        ),
    ),
    _info(
        "at-least-once-violation",
        "consumer_groups",
        "A consumer group committed past an acknowledged record that none of its members had read.",
        "`writer` is the send's `ok` completion, `commit` the first `ok` commit past "
        "`offset` (made after the send was invoked), `committed` the offset it committed; "
        "`read_by_anyone` says whether any `ok` poll at all read the value.",
        "acks=0 or acks=1, unclean leader election, or a power loss under a flush policy "
        "that does not fsync before acknowledging, and only when no consumer at all read "
        "the record; or unclean leader election where the group had committed past the "
        "offset before the record was written (the offset written again)",
        "configuration",
        ("key", "value", "offset", "writer", "commit", "committed", "acks", "read_by_anyone"),
    ),
)

_CONFORMANCE = (
    _info(
        "ack-below-min-isr",
        "conformance",
        "An acks=-1 write was acknowledged while its partition's ISR, per the SUT's own "
        "events, had fewer members than min.insync.replicas.",
        "`writer` is the send's `ok` completion and `invoked` its invocation; `event` the "
        "SUT event that set the partition's state the acknowledgement came in: `leader`, "
        "`isr`, against `min_insync_replicas` from test.json.",
        "no configuration: the leader must refuse the write (NOT_ENOUGH_REPLICAS) or not "
        "acknowledge it",
        "never",
        (
            "key",
            "value",
            "offset",
            "writer",
            "invoked",
            "acks",
            "event",
            "leader",
            "isr",
            "min_insync_replicas",
        ),
    ),
    _info(
        "election-outside-isr",
        "conformance",
        "A leader was elected from outside its partition's last ISR and eligible leader "
        "replicas although the election was called clean or unclean election was off.",
        "`election` is the SUT's `leader-election` event, `leader` the broker it elected; "
        "`last_isr` and `last_elr` the ISR and eligible leader replicas before it, set by "
        "the event `last_event`; `unclean` what the election said of itself.",
        "no configuration: a clean election picks a member of the ISR or of the eligible "
        "leader replicas, and with unclean election off no other may lead",
        "never",
        (
            "key",
            "election",
            "time",
            "leader",
            "previous_leader",
            "leader_epoch",
            "unclean",
            "last_isr",
            "last_elr",
            "last_event",
        ),
    ),
    _info(
        "isr-join-behind-hw",
        "conformance",
        "A leader added a follower to the ISR whose log end, as the leader knew it, was below "
        "the leader's high watermark.",
        "`event` is the leader's `isr-change`; `follower` the broker it added, "
        "`follower_log_end_offset` its log end and `high_watermark` the leader's when the "
        "leader decided; `previous_isr` and `isr` the ISR before and after.",
        "no configuration: a follower joins the ISR only once its log end reaches the high "
        "watermark",
        "never",
        (
            "key",
            "event",
            "time",
            "leader",
            "leader_epoch",
            "follower",
            "follower_log_end_offset",
            "high_watermark",
            "isr",
            "previous_isr",
        ),
    ),
    _info(
        "hw-regression",
        "conformance",
        "A leader's high watermark moved back while it led its partition in one leader epoch.",
        "`event` is the leader's `isr-change` whose `high_watermark` is below the "
        "`earlier_high_watermark` of its `isr-change` `earlier_event`, in the same "
        "`leader_epoch`.",
        "no configuration: the high watermark never goes back",
        "never",
        (
            "key",
            "event",
            "time",
            "leader",
            "leader_epoch",
            "high_watermark",
            "earlier_event",
            "earlier_high_watermark",
        ),
    ),
    _info(
        "truncated-acknowledged",
        "conformance",
        "A replica truncated acknowledged acks=-1 writes it held as a member of the ISR that "
        "committed them, although the log kept them.",
        "`event` is the replica's `truncation` (from `from_offset` to `to_offset`, by the rule "
        "it gives as `reason`); `acknowledged` counts the writes it cut, of which `value` at "
        "`offset` (acknowledged on line `writer`) is the first.",
        "no configuration: a replica of the ISR never discards a committed record",
        "never",
        (
            "key",
            "event",
            "time",
            "broker",
            "from_offset",
            "to_offset",
            "leader_epoch",
            "reason",
            "acknowledged",
            "offset",
            "value",
            "writer",
            "invoked",
        ),
    ),
    _info(
        "stale-isr-member",
        "conformance",
        "A follower stayed in its partition's ISR longer than replica.lag.time.max.ms after "
        "its broker stopped fetching, while its leader could have removed it.",
        "`fault` is the nemesis event that killed, paused or froze the follower's `node` "
        "(broker `follower`), healed by `healed`; `event` is the SUT event whose state, "
        "still holding the follower in the `isr` of `leader`, held at the `deadline` (the "
        "fault's time plus the lag time, the clock tolerance and a grace for the leader's "
        "ISR check).",
        "no configuration: a leader removes a follower that has not fetched within the lag time",
        "never",
        (
            "key",
            "follower",
            "node",
            "fault",
            "fault_f",
            "fault_time",
            "healed",
            "healed_time",
            "leader",
            "leader_epoch",
            "deadline",
            "event",
            "isr",
            "replica_lag_time_max_ms",
        ),
    ),
    _info(
        "poll-below-anchor",
        "consumer_anchors",
        "A consumer process's first read of a key started below the committed offset its "
        "group held when the process started.",
        "`assign` is the process's assign or subscribe, `anchor` the least committed offset "
        "the group may have held then (set by the commit `anchor_commit`), or the `position` "
        "the assign said the consumer starts at where that is greater (`anchor_from`); "
        "`reader` the first `ok` read, which started at `offset` (`value`).",
        "a SUT truncation of the key to below the anchor, between the anchor's commit and "
        "the read, that removed committed records (below the high watermark then), an "
        "allowed unclean election before the read, an allowed loss with power of a record "
        "below the anchor in between, or an allowed loss with power of the group's commits "
        "on the offsets topic in between (every broker's, or any one's while the offsets "
        "topic's min.insync.replicas is 1)",
        "configuration",
        (
            "key",
            "process",
            "reader",
            "assign",
            "anchor",
            "anchor_from",
            "anchor_commit",
            "position",
            "offset",
            "value",
        ),
    ),
    _info(
        "commit-backwards",
        "consumer_anchors",
        "A consumer process committed a key's offset below where it started or below its "
        "own earlier commit of that key.",
        "`commit` is the `ok` commit of `committed`; `above` the offset it fell below: the "
        "process's anchor (`since: anchor`) or its own earlier commit (`since: own-commit`).",
        "a SUT truncation of the key to below `above`, after the process's anchor was "
        "committed, that removed committed records (below the high watermark then), an "
        "allowed unclean election before the commit, an allowed loss with power of a "
        "record below `above` in between, or an allowed loss with power of the group's "
        "commits on the offsets topic in between (every broker's, or any one's while the "
        "offsets topic's min.insync.replicas is 1)",
        "configuration",
        ("key", "process", "commit", "committed", "above", "since"),
    ),
    _info(
        "generation-double-owner",
        "generations",
        "Two consumer processes were given the same key in the same generation of their group.",
        "`processes` are the group members whose `ok` assigns (`ops`) gave them the key "
        "under `generation`.",
        "a flush policy that does not fsync before acknowledging, when every broker lost "
        "power between the two assigns, or any broker did while the offsets topic's "
        "min.insync.replicas is 1 (the group's generations on the offsets topic lost, a "
        "generation given again); otherwise none: in each generation the group's leader "
        "gives every partition to one member",
        "configuration",
        ("key", "generation", "processes", "ops"),
    ),
    _info(
        "stale-generation-commit",
        "generations",
        "A group member's commit under an older generation was accepted after a newer "
        "generation's assignment had been given.",
        "`commit` is the `ok` commit by `process` under `generation`, invoked after the `ok` "
        "assign `assign` of generation `newer` had completed; `key` lists the keys committed.",
        "a flush policy that does not fsync before acknowledging, when every broker lost "
        "power between the assign and the commit, or any broker did while the offsets "
        "topic's min.insync.replicas is 1 (the group's generations on the offsets topic "
        "lost); otherwise none: the coordinator takes commits only under the group's "
        "current generation (ILLEGAL_GENERATION otherwise)",
        "configuration",
        ("key", "process", "commit", "generation", "newer", "assign"),
    ),
)

_REPLICAS = (
    _info(
        "replica-divergence",
        "replicas",
        "Replicas of a key held different records at an offset below its high watermark, or "
        "a member of its ISR lacked one, when every replica was read after the run.",
        "`broker` (on `node`) is compared with the reference, the `leader`'s log (another "
        "replica's where the leader lacks the offset): below the `high_watermark` it holds "
        "another value at `differs` offsets, a record whose CRC is wrong at `corrupt`, and, "
        "as a member of the final `isr` (`in_isr`), nothing at `missing`; `offsets` are "
        "the first and last of them, `examples` the first few beside the reference, `read` "
        "the replica's first `replica-read` line.",
        "no configuration: below the high watermark every replica holds the leader's log",
        "never",
        (
            "key",
            "broker",
            "node",
            "in_isr",
            "leader",
            "isr",
            "high_watermark",
            "differs",
            "corrupt",
            "missing",
            "offsets",
            "examples",
            "read",
        ),
    ),
)

ANOMALIES: dict[str, AnomalyInfo] = {
    info.name: info for info in (*_CATALOGUE, *_CONFORMANCE, *_REPLICAS)
}
"""Every anomaly type the checkers can report, in the order of docs/anomalies.md."""


def history_line(index: Any) -> int | None:
    """The history.jsonl line (1-based) of the operation with history `index` (0-based)."""
    if _is_int(index) and index >= 0:
        return int(index) + 1
    return None


def describe_case(name: str, case: Mapping[str, Any]) -> dict[str, Any]:
    """One results.json case of anomaly `name` explained: `key`, `offsets` (the record
    offsets it concerns), `lines` (history.jsonl lines of the operations it names, sorted)
    and `text`, one sentence. Missing fields are left out of the sentence; a case of
    unexpected shape gets a generic sentence. Never raises."""
    label = name if isinstance(name, str) else repr(name)
    try:
        return _describe(label, case)
    except Exception:
        return {
            "key": None,
            "offsets": [],
            "lines": [],
            "text": f"{label}: a case of unexpected shape ({type(case).__name__})",
        }


def _describe(name: str, case: Mapping[str, Any]) -> dict[str, Any]:
    if not isinstance(case, Mapping):
        raise TypeError(type(case).__name__)
    key = _safe(lambda: _key_of(case), None)
    offsets: list[int] = _safe(lambda: _offsets_of(case), [])
    lines: list[int] = _safe(lambda: _lines_of(case), [])
    text = ""
    if name in _TEXT and _TEXT[name][0] in case:
        sentence = _TEXT[name][1]
        text = _safe(lambda: sentence(case, "?" if key is None else key), "")
    if not text:
        text = _generic(name, key, offsets, lines)
    reason = case.get("expected_because")
    if isinstance(reason, str) and reason:
        text = f"{text}; expected: {reason}"
    described = {"key": key, "offsets": offsets, "lines": lines, "text": text}
    described.update({name: case[name] for name in ("cause", "no_cause") if name in case})
    return described


def _safe(compute: Callable[[], _T], default: _T) -> _T:
    try:
        return compute()
    except Exception:
        return default


def _is_int(item: object) -> TypeGuard[int]:
    return isinstance(item, int) and not isinstance(item, bool)


def _key_of(case: Mapping[str, Any]) -> str | None:
    key = case.get("key")
    return None if key is None else str(key)


def _offsets_of(case: Mapping[str, Any]) -> list[int]:
    listed = case.get("offsets")
    if isinstance(listed, list):
        return [item for item in listed if _is_int(item)]
    offset = case.get("offset")
    return [offset] if _is_int(offset) else []


def _lines_of(case: Mapping[str, Any]) -> list[int]:
    indices: list[Any] = [case.get(name) for name in SINGLE_OPERATION_FIELDS]
    ops = case.get("ops")
    if isinstance(ops, list):
        indices.extend(ops)
    sends = case.get("sends")
    if isinstance(sends, list):
        indices.extend(_send_index(send) for send in sends)
    found = (history_line(index) for index in indices)
    return sorted({line for line in found if line is not None})


def _send_index(send: Any) -> Any:
    if not isinstance(send, Mapping):
        return None
    done = send.get("index")
    return done if _is_int(done) else send.get("invoke_index")


def _generic(name: str, key: str | None, offsets: list[int], lines: list[int]) -> str:
    text = f"{name} on key {key}" if key is not None else f"{name} (key unknown)"
    if offsets:
        text += f", offset{'s' if len(offsets) > 1 else ''} {_join(offsets)}"
    if lines:
        text += f"; history line{'s' if len(lines) > 1 else ''} {_join(lines)}"
    return text


def _join(items: Iterable[Any]) -> str:
    return ", ".join(_show(item) for item in items)


def _show(value: Any) -> str:
    if isinstance(value, str):
        return json.dumps(value, ensure_ascii=False)
    if value is None:
        return "unknown"
    return str(value)


def _line(index: Any, what: str) -> str:
    line = history_line(index)
    return f"{what} on line {line}" if line is not None else f"{what} (line unknown)"


def _written(case: Mapping[str, Any]) -> str:
    """Such as: value 4 written at offset 2 by the operation completed on line 10 (ok, acks=-1)."""
    offset = case.get("offset")
    text = f"value {_show(case.get('value'))} written"
    text += f" at offset {offset}" if _is_int(offset) else " (offset unknown)"
    if history_line(case.get("writer")) is None:
        text += " by an operation that never completed"
    else:
        text += f" by the {_line(case.get('writer'), 'operation completed')}"
    how = [str(case["status"])] if isinstance(case.get("status"), str) else []
    if _is_int(case.get("acks")):
        how.append(f"acks={case['acks']}")
    return f"{text} ({', '.join(how)})" if how else text


def _inconsistent(case: Mapping[str, Any], key: str) -> str:
    values = case.get("values")
    text = f"key {key}: offset {_show(case.get('offset'))} holds "
    if isinstance(values, list) and len(values) > 1:
        return text + f"{len(values)} distinct values ({_join(values)})"
    return text + "several distinct values"


def _duplicate(case: Mapping[str, Any], key: str) -> str:
    offsets = _offsets_of(case)
    text = f"key {key}: value {_show(case.get('value'))} sits at "
    if len(offsets) > 1:
        text += f"{len(offsets)} offsets ({_join(offsets)})"
    else:
        text += "more than one offset"
    sends = [send for send in case.get("sends") or [] if isinstance(send, Mapping)]
    described = []
    for send in sends:
        done = send.get("index")
        if _is_int(done):
            described.append(f"line {history_line(done)} ({send.get('type', '?')})")
        elif history_line(send.get("invoke_index")) is not None:
            described.append(f"line {history_line(send['invoke_index'])} (never completed)")
    if described:
        text += (
            f", sent by the operation{'s' if len(described) > 1 else ''} on {', '.join(described)}"
        )
    return text


def _g1a(case: Mapping[str, Any], key: str) -> str:
    text = (
        f"key {key}: value {_show(case.get('value'))}, whose send failed "
        f"({_line(case.get('writer'), 'completed fail')}), was read by the "
        f"{_line(case.get('reader'), 'ok poll')}"
    )
    reads = case.get("reads")
    if _is_int(reads) and reads > 1:
        text += f" ({reads} ok reads in all)"
    return text


def _lost_write(case: Mapping[str, Any], key: str) -> str:
    text = f"key {key}: {_written(case)} was never read by an ok poll, although ok polls "
    index, reach = case.get("index"), case.get("max_read_index")
    if _is_int(index) and _is_int(reach) and reach > index:
        text += f"of the key reached dense index {reach}, past the write's {index}"
    elif _is_int(index) and reach == index:
        text += f"read another value at its position (dense index {index})"
    else:
        text += "of the key reached its offset or beyond"
    return text + _placed(case)


def _unseen(case: Mapping[str, Any], key: str) -> str:
    return f"key {key}: {_written(case)} was never read by an ok poll"


def _lost_acked(case: Mapping[str, Any], key: str) -> str:
    text = f"key {key}: {_written(case)} is missing from the key's complete final read"
    reach, end = case.get("final_read_to"), case.get("log_end")
    if _is_int(reach):
        text += f", which read up to offset {reach}"
        if _is_int(end):
            text += f", where the log ended (end offset {end})"
    elif _is_int(end):
        text += f", which found the log ending at offset {end}"
    return text + _placed(case)


_PLACEMENTS = {
    "prefix": "a lost prefix: the log held nothing before it",
    "middle": "a hole in the middle of the log",
    "tail": "a lost tail: the log held nothing after it",
    "whole-log": "the whole log lost: nothing was held at the end",
}


def _placed(case: Mapping[str, Any]) -> str:
    placement = case.get("placement")
    return f" ({_PLACEMENTS[placement]})" if placement in _PLACEMENTS else ""


def _process(case: Mapping[str, Any]) -> str:
    process = case.get("process")
    return f"process {process}'s" if _is_int(process) else "a process's"


def _pair(case: Mapping[str, Any], name: str) -> tuple[Any, Any]:
    items = case.get(name)
    if isinstance(items, list) and len(items) == 2:
        return items[0], items[1]
    return None, None


def _record(offset: Any, value: Any) -> str:
    """A record read: "offset 5 (value 8)"."""
    where = f"offset {offset}" if _is_int(offset) else "an unknown offset"
    return f"{where} (value {_show(value)})"


def _sent(value: Any, offset: Any) -> str:
    """A record sent: "value 8 at offset 5"."""
    where = f"at offset {offset}" if _is_int(offset) else "(offset not reported)"
    return f"value {_show(value)} {where}"


def _step(case: Mapping[str, Any]) -> str:
    delta = case.get("delta")
    if not _is_int(delta):
        return ""
    if delta > 1:
        skipped = delta - 1
        return f": {delta} dense indices on, {skipped} record{'s' if skipped > 1 else ''} skipped"
    return f": a step of {delta} dense ind{'ex' if abs(delta) == 1 else 'ices'}"


def _poll_between(case: Mapping[str, Any], key: str) -> str:
    (first, second), (before, after) = _pair(case, "ops"), _pair(case, "offsets")
    value_before, value_after = _pair(case, "values")
    return (
        f"key {key}: {_process(case)} {_line(second, 'poll completed')} began at "
        f"{_record(after, value_after)}, but its previous ok read of the key, "
        f"{_line(first, 'completed')}, had ended at {_record(before, value_before)}"
        f"{_step(case)}"
    )


def _poll_inside(case: Mapping[str, Any], key: str) -> str:
    (before, after), (value_before, value_after) = _pair(case, "offsets"), _pair(case, "values")
    kind = case.get("type")
    what = f"poll completed {kind}" if isinstance(kind, str) else "poll completed"
    return (
        f"key {key}: inside {_process(case)} {_line(case.get('op'), what)}, "
        f"{_record(before, value_before)} is followed by {_record(after, value_after)}"
        f"{_step(case)}"
    )


def _send_between(case: Mapping[str, Any], key: str) -> str:
    (first, second), (before, after) = _pair(case, "ops"), _pair(case, "offsets")
    value_before, value_after = _pair(case, "values")
    return (
        f"key {key}: {_process(case)} {_line(second, 'send completed')} put "
        f"{_sent(value_after, after)}, but its previous send to the key, "
        f"{_line(first, 'completed')}, had put {_sent(value_before, before)}{_step(case)}"
    )


def _send_inside(case: Mapping[str, Any], key: str) -> str:
    (before, after), (value_before, value_after) = _pair(case, "offsets"), _pair(case, "values")
    status = case.get("status")
    what = f"operation completed {status}" if isinstance(status, str) else "operation completed"
    return (
        f"key {key}: inside {_process(case)} {_line(case.get('op'), what)}, the send of "
        f"{_sent(value_before, before)} is followed by the send of "
        f"{_sent(value_after, after)}{_step(case)}"
    )


def _unclean(case: Mapping[str, Any], key: str) -> str:
    leader, previous, epoch = (
        case.get(name) for name in ("leader", "previous_leader", "leader_epoch")
    )
    who = [f"broker {leader} elected from outside the ISR"] if _is_int(leader) else []
    if _is_int(previous):
        who.append(f"replacing {previous}")
    if _is_int(epoch):
        who.append(f"epoch {epoch}")
    about = ", ".join(who)
    lost = case.get("lost")
    count = (
        f"{lost} acknowledged write{'s' if lost != 1 else ''}"
        if _is_int(lost)
        else "acknowledged writes"
    )
    first, last = _pair(case, "offsets")
    if _is_int(first) and first == last:
        span = f" at offset {first}"
    elif _is_int(first) and _is_int(last):
        span = f" at offsets {first} to {last}"
    else:
        span = ""
    text = f"key {key}: the unclean {_line(case.get('election'), 'leader election')}"
    text += f" ({about})" if about else ""
    text += f" lost {count}{span}"
    values = case.get("lost_values")
    if isinstance(values, list) and values:
        more = ", ..." if _is_int(lost) and lost > len(values) else ""
        text += f" (values {_join(values)}{more})"
    return text


def _at_least_once(case: Mapping[str, Any], key: str) -> str:
    committed = case.get("committed")
    past = f" committed offset {committed}, past it" if _is_int(committed) else " committed past it"
    text = (
        f"key {key}: {_written(case)} was read by no member of the consumer group, although "
        f"the {_line(case.get('commit'), 'commit completed')}{past}"
    )
    anyone = case.get("read_by_anyone")
    if anyone is True:
        text += " (a consumer outside the group read it)"
    elif anyone is False:
        text += " (no ok poll read it at all)"
    return text


def _below_min_isr(case: Mapping[str, Any], key: str) -> str:
    isr = case.get("isr")
    members = f"ISR {_show(isr)}" if isinstance(isr, list) else "an ISR"
    leader = case.get("leader")
    who = f" of leader {leader}" if _is_int(leader) else ""
    invoked = _line(case.get("invoked"), "invoked")
    return (
        f"key {key}: {_written(case)}, {invoked}, was acknowledged while the "
        f"{members}{who} set by the {_line(case.get('event'), 'SUT event')} was smaller than "
        f"min.insync.replicas={_show(case.get('min_insync_replicas'))}"
    )


def _elected_outside(case: Mapping[str, Any], key: str) -> str:
    kind = "unclean" if case.get("unclean") is True else "clean"
    isr = case.get("last_isr")
    last = f"ISR {_show(isr)}" if isinstance(isr, list) else "ISR"
    return (
        f"key {key}: the {kind} {_line(case.get('election'), 'leader election')} made broker "
        f"{_show(case.get('leader'))} leader, outside the last {last} set by the "
        f"{_line(case.get('last_event'), 'SUT event')}"
    )


def _joined_behind(case: Mapping[str, Any], key: str) -> str:
    return (
        f"key {key}: leader {_show(case.get('leader'))} added broker "
        f"{_show(case.get('follower'))} to the ISR in the "
        f"{_line(case.get('event'), 'ISR change')} while its log ended at offset "
        f"{_show(case.get('follower_log_end_offset'))}, below the high watermark "
        f"{_show(case.get('high_watermark'))}"
    )


def _hw_back(case: Mapping[str, Any], key: str) -> str:
    return (
        f"key {key}: leader {_show(case.get('leader'))}'s high watermark was "
        f"{_show(case.get('high_watermark'))} at the {_line(case.get('event'), 'ISR change')}, "
        f"below the {_show(case.get('earlier_high_watermark'))} of its "
        f"{_line(case.get('earlier_event'), 'ISR change')} in the same leader epoch "
        f"{_show(case.get('leader_epoch'))}"
    )


def _truncated_acked(case: Mapping[str, Any], key: str) -> str:
    count = case.get("acknowledged")
    writes = "write" if count == 1 else "writes"
    return (
        f"key {key}: broker {_show(case.get('broker'))}'s "
        f"{_line(case.get('event'), 'truncation')} (offset {_show(case.get('from_offset'))} to "
        f"{_show(case.get('to_offset'))}, by the rule {case.get('reason') or 'unknown'}) cut "
        f"{_show(count)} "
        f"acknowledged {writes} it held in the ISR, from {_show(case.get('value'))} at offset "
        f"{_show(case.get('offset'))} ({_line(case.get('writer'), 'acknowledged')}), which the "
        "log kept"
    )


def _stale_member(case: Mapping[str, Any], key: str) -> str:
    return (
        f"key {key}: broker {_show(case.get('follower'))} (node {case.get('node') or 'unknown'}), "
        f"stopped by the {_line(case.get('fault'), str(case.get('fault_f') or 'fault'))} and "
        f"{_line(case.get('healed'), 'healed')}, was still in leader "
        f"{_show(case.get('leader'))}'s ISR {_show(case.get('isr'))} (set by the "
        f"{_line(case.get('event'), 'SUT event')}) at its deadline, "
        f"{_show(case.get('replica_lag_time_max_ms'))} ms lag time and grace after the fault"
    )


def _below_anchor(case: Mapping[str, Any], key: str) -> str:
    return (
        f"key {key}: process {_show(case.get('process'))}, started by the "
        f"{_line(case.get('assign'), 'assign')} when its group had committed at least "
        f"offset {_show(case.get('anchor'))} ({_line(case.get('anchor_commit'), 'commit')}), "
        f"first read {_record(case.get('offset'), case.get('value'))} in the "
        f"{_line(case.get('reader'), 'poll')}, below it"
    )


def _backwards(case: Mapping[str, Any], key: str) -> str:
    since = (
        "where it started" if case.get("since") == "anchor" else "its own earlier commit of the key"
    )
    return (
        f"key {key}: process {_show(case.get('process'))} committed offset "
        f"{_show(case.get('committed'))} in the {_line(case.get('commit'), 'commit')}, below "
        f"offset {_show(case.get('above'))}, {since}"
    )


def _double_owner(case: Mapping[str, Any], key: str) -> str:
    processes = case.get("processes")
    names = _join(processes) if isinstance(processes, list) else _show(processes)
    return (
        f"key {key}: processes {names} were each given it in generation "
        f"{_show(case.get('generation'))} of their group"
    )


def _stale_commit(case: Mapping[str, Any], key: str) -> str:
    return (
        f"key {key}: process {_show(case.get('process'))} committed under generation "
        f"{_show(case.get('generation'))} in the {_line(case.get('commit'), 'commit')}, "
        f"accepted after generation {_show(case.get('newer'))} was given in the "
        f"{_line(case.get('assign'), 'assign')}"
    )


def _diverged(case: Mapping[str, Any], key: str) -> str:
    counts = [
        (case.get("differs"), "another value at {} offset{}"),
        (case.get("corrupt"), "a record with a wrong CRC at {} offset{}"),
        (case.get("missing"), "nothing at {} offset{}"),
    ]
    found = [text.format(n, "" if n == 1 else "s") for n, text in counts if _is_int(n) and n > 0]
    offsets = case.get("offsets")
    span = ""
    if isinstance(offsets, list) and len(offsets) == 2:
        first, last = offsets
        span = (
            f" (offset {_show(first)})"
            if first == last
            else f" (offsets {_show(first)} to {_show(last)})"
        )
    where = "in" if case.get("in_isr") is True else "outside"
    return (
        f"key {key}: broker {_show(case.get('broker'))} ({where} the ISR {_show(case.get('isr'))}), "
        f"{_line(case.get('read'), 'replica read')}, holds {', '.join(found) or 'a different log'} "
        f"below the high watermark {_show(case.get('high_watermark'))}{span}, against leader "
        f"{_show(case.get('leader'))}'s log"
    )


Sentence = Callable[[Mapping[str, Any], str], str]

_TEXT: dict[str, tuple[str, Sentence]] = {
    "inconsistent-offsets": ("offset", _inconsistent),
    "duplicate": ("value", _duplicate),
    "G1a": ("value", _g1a),
    "lost-write": ("value", _lost_write),
    "unseen": ("value", _unseen),
    "lost-acked-write": ("value", _lost_acked),
    "poll-skip": ("values", _poll_between),
    "nonmonotonic-poll": ("values", _poll_between),
    "int-poll-skip": ("values", _poll_inside),
    "int-nonmonotonic-poll": ("values", _poll_inside),
    "nonmonotonic-send": ("values", _send_between),
    "int-send-skip": ("values", _send_inside),
    "int-nonmonotonic-send": ("values", _send_inside),
    "unclean-loss-window": ("election", _unclean),
    "at-least-once-violation": ("value", _at_least_once),
    "ack-below-min-isr": ("writer", _below_min_isr),
    "election-outside-isr": ("election", _elected_outside),
    "isr-join-behind-hw": ("event", _joined_behind),
    "hw-regression": ("event", _hw_back),
    "truncated-acknowledged": ("event", _truncated_acked),
    "stale-isr-member": ("event", _stale_member),
    "poll-below-anchor": ("reader", _below_anchor),
    "commit-backwards": ("commit", _backwards),
    "generation-double-owner": ("processes", _double_owner),
    "stale-generation-commit": ("commit", _stale_commit),
    "replica-divergence": ("broker", _diverged),
}
"""Per type: the field without which its cases get the generic sentence, and its sentence."""
