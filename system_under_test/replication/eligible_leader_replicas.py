"""Eligible leader replicas (ELR, Kafka's KIP-966): who may lead cleanly from outside the ISR.

The high watermark advances only while the ISR has at least min.insync.replicas members
(``effective_min_isr``). So the replicas that leave the ISR as it falls below that minimum
hold every committed record, and stay so while it remains below: nothing more is committed
until the ISR is back at the minimum. They are the ELR, kept in the partition state, and the
controller may elect one of them cleanly when no ISR member is fit to lead (the last ISR
member died, or restarted and may have lost its unsynced tail). A member that rejoins the
ISR leaves the ELR; once the ISR is back at the minimum the ELR is emptied; one that
restarted is dropped by the controller, since it may have lost what it held.
"""

from __future__ import annotations

from collections.abc import Collection


def effective_min_isr(min_insync_replicas: int, replication_factor: int) -> int:
    """min.insync.replicas, capped by the replication factor (as Kafka's controller does),
    so that a partition with fewer replicas than the setting still commits."""
    return max(1, min(min_insync_replicas, replication_factor))


def elr_after_isr_change(
    previous_isr: Collection[int],
    isr: Collection[int],
    elr: Collection[int],
    min_isr: int,
) -> tuple[int, ...]:
    """The ELR once the ISR goes from ``previous_isr`` to ``isr``: emptied where the ISR has
    ``min_isr`` members; otherwise without the ISR's members, with those it just lost."""
    if len(isr) >= min_isr:
        return ()
    removed = set(previous_isr) - set(isr)
    return tuple(sorted((set(elr) | removed) - set(isr)))
