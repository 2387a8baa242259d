"""The partition assignors a group's leader member runs, as Kafka's clients have them: each
takes every member's subscribed topics and the partitions of each topic, and gives each member
its partitions (a partition to exactly one member that subscribes to its topic).

``range``: per topic, the members subscribed in member-id order, the partitions in order, each
member a consecutive range, the first ones one partition more when they do not divide evenly.
``roundrobin``: every subscribed partition in (topic, partition) order, dealt to the members in
member-id order in turn, skipping members not subscribed to its topic.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Mapping, Sequence

Assignment = dict[str, dict[str, list[int]]]
"""Member id -> topic -> partitions."""
Assignor = Callable[[Mapping[str, Sequence[str]], Mapping[str, int]], Assignment]


def range_assignor(
    subscriptions: Mapping[str, Sequence[str]], partitions: Mapping[str, int]
) -> Assignment:
    """``subscriptions``: member id -> topics; ``partitions``: topic -> partition count
    (topics missing from it get no assignment)."""
    assignment: Assignment = {member: {} for member in subscriptions}
    for topic in sorted({t for topics in subscriptions.values() for t in topics}):
        if topic not in partitions:
            continue
        members = sorted(m for m, topics in subscriptions.items() if topic in topics)
        each, extra = divmod(partitions[topic], len(members))
        start = 0
        for i, member in enumerate(members):
            length = each + (1 if i < extra else 0)
            if length:
                assignment[member][topic] = list(range(start, start + length))
            start += length
    return assignment


def roundrobin_assignor(
    subscriptions: Mapping[str, Sequence[str]], partitions: Mapping[str, int]
) -> Assignment:
    """As ``range_assignor``, dealing every partition in turn."""
    assignment: Assignment = {member: {} for member in subscriptions}
    members = sorted(subscriptions)
    subscribed = {t for topics in subscriptions.values() for t in topics}
    turn = itertools.cycle(members)
    for topic in sorted(subscribed & set(partitions)):
        for partition in range(partitions[topic]):
            member = next(turn)
            while topic not in subscriptions[member]:
                member = next(turn)
            assignment[member].setdefault(topic, []).append(partition)
    return assignment


ASSIGNORS: dict[str, Assignor] = {"range": range_assignor, "roundrobin": roundrobin_assignor}
"""By the protocol name a member announces in JoinGroup."""
