"""Grudges applied with iptables: INPUT DROP rules inside each destination node.

All rules live in a chain of squall's own, ``SQUALL``, jumped to from the top of INPUT, so
healing is flushing one chain and nothing else on the node is touched. A DROP on INPUT
matches every packet from the source, so established connections are cut too, not only new
ones; a symmetric cut has rules on both sides, a one-way cut on the destination only (as
Jepsen does it). Needs a runtime where each node has its own network stack (docker, ssh).
"""

from __future__ import annotations

import shlex
from collections.abc import Sequence

from nemesis.errors import FaultError, UnsupportedFaultError
from nemesis.fanout import on_each_node
from nemesis.grudge import PartitionGrudge, sorted_nodes
from nemesis.protocols import NETWORK_RUNTIMES, FaultableCluster

CHAIN = "SQUALL"
COMMAND_TIMEOUT_S = 15.0


def ensure_chain_commands() -> list[str]:
    """Create the chain if missing and jump to it from INPUT position 1 if not already."""
    return [
        f"{{ iptables -w -n -L {CHAIN} >/dev/null 2>&1 || iptables -w -N {CHAIN}; }}",
        f"{{ iptables -w -C INPUT -j {CHAIN} 2>/dev/null || iptables -w -I INPUT 1 -j {CHAIN}; }}",
    ]


def drop_rule(source_address: str) -> str:
    """The rule that drops every packet from source_address."""
    return f"iptables -w -A {CHAIN} -s {shlex.quote(source_address)} -j DROP"


def install_command(source_addresses: Sequence[str]) -> str:
    """One shell line for a node: ensure the chain, replace its rules with drops of sources.

    The flush and the new rules run in one command, so a grudge replaces the previous one
    with no healed moment in between.
    """
    steps = [*ensure_chain_commands(), flush_command()]
    steps += [drop_rule(address) for address in source_addresses]
    return " && ".join(steps)


def flush_command() -> str:
    return f"iptables -w -F {CHAIN}"


def heal_command() -> str:
    """Flush the chain; a node where it does not exist (or without iptables) is fine."""
    return f"if iptables -w -n -L {CHAIN} >/dev/null 2>&1; then {flush_command()}; fi"


def remove_chain_command() -> str:
    """Undo everything squall did to iptables on a node (for ``squall clean``)."""
    return (
        f"if iptables -w -n -L {CHAIN} >/dev/null 2>&1; then "
        f"iptables -w -F {CHAIN}; "
        f"while iptables -w -D INPUT -j {CHAIN} 2>/dev/null; do :; done; "
        f"iptables -w -X {CHAIN}; fi"
    )


class Partitioner:
    """Applies grudges to, and heals, the nodes of one cluster."""

    def __init__(self, cluster: FaultableCluster) -> None:
        self.cluster = cluster

    def require_support(self) -> None:
        capabilities = self.cluster.capabilities
        if not capabilities.partitions:
            raise UnsupportedFaultError(
                f"partitions need the {' or '.join(NETWORK_RUNTIMES)} runtime; this cluster "
                f"runs on {capabilities.runtime}"
            )

    def commands(self, grudge: PartitionGrudge) -> dict[str, str]:
        """The command each node runs for grudge (every node: those without drops flush)."""
        unknown = set(grudge.nodes) - {node.name for node in self.cluster.all_nodes()}
        if unknown:
            raise FaultError(
                f"the grudge names {sorted_nodes(unknown)}, which are not nodes of cluster "
                f"{self.cluster.run_id}; a replayed schedule needs the same node names"
            )
        return {
            node.name: install_command(
                [
                    self.cluster.node(src).address
                    for src in sorted_nodes(grudge.drops.get(node.name, ()))
                ]
            )
            for node in self.cluster.all_nodes()
        }

    def apply(self, grudge: PartitionGrudge) -> dict[str, BaseException]:
        """Replace whatever partition is in place by grudge; failures by node."""
        self.require_support()
        commands = self.commands(grudge)
        _done, failures = on_each_node(
            list(commands),
            lambda name: self.cluster.node(name).run(commands[name], timeout=COMMAND_TIMEOUT_S),
        )
        return failures

    def heal(self, command: str | None = None) -> dict[str, BaseException]:
        """Flush the chain on every node (idempotent); failures by node."""
        self.require_support()
        text = command or heal_command()
        _done, failures = on_each_node(
            [node.name for node in self.cluster.all_nodes()],
            lambda name: self.cluster.node(name).run(text, timeout=COMMAND_TIMEOUT_S),
        )
        return failures

    def remove_chain(self) -> dict[str, BaseException]:
        """Flush and delete the chain and its jump everywhere; failures by node."""
        return self.heal(remove_chain_command())
