"""Network shaping with tc netem: delay (with jitter) and loss on a node's interface.

netem shapes what leaves the interface, so a node with a delay slows every packet it sends,
to brokers, ZooKeeper and clients alike. The interface is the one that routes to another
node (``ip -o route get``), not an assumed ``eth0``. Needs a runtime where each node has its
own network stack (docker, ssh); the local runtime refuses it.

squall changes only what it set up: its netem qdisc has a handle of its own (``5151:``), a
heal deletes the root qdisc only when it has that handle, and netem is never put over a root
qdisc someone else configured (anything but the kernel's default, handle ``0:``).
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from nemesis.errors import FaultError, NodeCommandError, UnsupportedFaultError
from nemesis.fanout import on_each_node
from nemesis.protocols import NETWORK_RUNTIMES, FaultableCluster

DISTRIBUTIONS = ("normal", "pareto", "paretonormal")
COMMAND_TIMEOUT_S = 15.0
QDISC_HANDLE = "5151:"
"""The handle of squall's netem qdisc: the only root qdisc a heal deletes."""
FOREIGN_QDISC_EXIT = 3
_NO_QDISC = re.compile(
    r"No such file or directory|Cannot delete qdisc with handle of zero|"
    r"Cannot find specified qdisc|Invalid handle|RTNETLINK answers: Invalid argument",
    re.IGNORECASE,
)
_NO_NETEM = re.compile(r"qdisc kind is unknown|Unknown qdisc", re.IGNORECASE)
_ROUTE_DEV = re.compile(r"\bdev\s+(\S+)")
INTERFACE_NAME = re.compile(r"^[A-Za-z0-9_.:@-]{1,15}$")
"""What a Linux interface name can be (at most 15 bytes, no '/' or spaces)."""


def _number(field: str, value: object) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or value < 0:
        raise FaultError(f"netem {field} must be a number >= 0, got {value!r}")
    return float(value)


def _text(value: float) -> str:
    """100.0 -> '100', 0.5 -> '0.5' (tc takes both)."""
    return f"{value:g}"


@dataclass(frozen=True)
class NetemSpec:
    """One netem setting: ``delay_ms`` +/- ``jitter_ms`` (shaped by distribution) and loss."""

    delay_ms: float = 0.0
    jitter_ms: float = 0.0
    distribution: str | None = "normal"
    loss_pct: float = 0.0

    def __post_init__(self) -> None:
        for name in ("delay_ms", "jitter_ms", "loss_pct"):
            object.__setattr__(self, name, _number(name, getattr(self, name)))
        if self.loss_pct >= 100:
            raise FaultError(
                "netem loss_pct must be below 100: total loss would cut squall's own control "
                "connection too; use a partition to cut nodes off"
            )
        if self.distribution is not None and self.distribution not in DISTRIBUTIONS:
            raise FaultError(
                f"netem distribution {self.distribution!r}: use one of {', '.join(DISTRIBUTIONS)}"
            )
        if self.delay_ms == 0 and self.jitter_ms == 0 and self.loss_pct == 0:
            raise FaultError("a netem fault needs delay_ms, jitter_ms or loss_pct above 0")

    def to_value(self) -> dict[str, Any]:
        """The fault-value fields of this setting."""
        return {
            "delay_ms": self.delay_ms,
            "jitter_ms": self.jitter_ms,
            "distribution": self.distribution,
            "loss_pct": self.loss_pct,
        }

    @classmethod
    def from_value(cls, value: Mapping[str, Any]) -> NetemSpec:
        """Read the netem fields of a fault's value (the others are ignored)."""
        return cls(
            delay_ms=value.get("delay_ms", 0.0),
            jitter_ms=value.get("jitter_ms", 0.0),
            distribution=value.get("distribution", "normal"),
            loss_pct=value.get("loss_pct", 0.0),
        )


def netem_command(interface: str, spec: NetemSpec) -> str:
    """``tc qdisc replace dev IFACE root handle 5151: netem delay Dms Jms [distribution X]
    loss L%``."""
    delay = f"delay {_text(spec.delay_ms)}ms"
    if spec.jitter_ms > 0:
        delay += f" {_text(spec.jitter_ms)}ms"
        if spec.distribution is not None:
            delay += f" distribution {spec.distribution}"
    return (
        f"tc qdisc replace dev {_device(interface)} root handle {QDISC_HANDLE} netem {delay} "
        f"loss {_text(spec.loss_pct)}%"
    )


def foreign_qdisc_guard(interface: str) -> str:
    """Shell that exits 3 when the interface's root qdisc is someone else's: neither the
    kernel's default (handle ``0:``) nor squall's netem (netem must not replace it)."""
    dev = _device(interface)
    return (
        f"root=$(tc qdisc show dev {dev} 2>/dev/null | grep ' root'); "
        f'case "$root" in ""|"qdisc "*" 0: root"*|"qdisc netem {QDISC_HANDLE} root"*) ;; '
        f'*) echo "squall: {interface} has a root qdisc that squall did not set up ($root); '
        'netem would replace it: remove it or leave this node out of netem faults" >&2; '
        f"exit {FOREIGN_QDISC_EXIT};; esac"
    )


def shape_command(interface: str, spec: NetemSpec) -> str:
    """Put squall's netem on the interface, unless another root qdisc is there."""
    return f"{foreign_qdisc_guard(interface)}; {netem_command(interface, spec)}"


def clear_command(interface: str) -> str:
    """Remove squall's netem, the root qdisc with squall's handle (back to the kernel's
    default); any other root qdisc stays (tc says "Invalid handle")."""
    return f"tc qdisc del dev {_device(interface)} root handle {QDISC_HANDLE}"


def _device(interface: str) -> str:
    return shlex.quote(check_interface(interface))


def check_interface(interface: str) -> str:
    """The interface name if it is one; FaultError otherwise (it comes from a node's output)."""
    if not INTERFACE_NAME.match(interface):
        raise FaultError(f"{interface!r} is not a network interface name")
    return interface


def is_no_qdisc_error(output: str) -> bool:
    """Whether ``tc qdisc del`` failed only because there was nothing to delete."""
    return bool(_NO_QDISC.search(output))


def route_command(address: str) -> str:
    """How to ask a node which interface reaches address."""
    return f"ip -o route get {shlex.quote(address)}"


def parse_route_interface(output: str) -> str:
    """The ``dev X`` of ``ip -o route get`` output; FaultError quoting it if absent or if it is
    no interface name (the node wrote it, and it goes into tc commands)."""
    match = _ROUTE_DEV.search(output)
    if match is None:
        raise FaultError(f"cannot find the interface in `ip -o route get` output: {output!r}")
    if not INTERFACE_NAME.match(match.group(1)):
        raise FaultError(
            f"`ip -o route get` named {match.group(1)!r}, which is not a network interface name"
        )
    return match.group(1)


class NetworkShaper:
    """Applies and clears netem on the nodes of a cluster."""

    def __init__(self, cluster: FaultableCluster) -> None:
        self.cluster = cluster
        self._interfaces: dict[str, str] = {}

    def require_support(self) -> None:
        capabilities = self.cluster.capabilities
        if capabilities.netem:
            return
        if capabilities.runtime in NETWORK_RUNTIMES:
            raise UnsupportedFaultError(
                f"network shaping (netem) is unavailable on this {capabilities.runtime} cluster: "
                "the nodes' kernel has no sch_netem (`modprobe sch_netem` on the host, then "
                "bring the cluster up again)"
            )
        raise UnsupportedFaultError(
            f"network shaping (netem) needs the {' or '.join(NETWORK_RUNTIMES)} runtime; this "
            f"cluster runs on {capabilities.runtime}"
        )

    def interface(self, name: str) -> str:
        """The interface of node name that reaches the other nodes (cached)."""
        if name not in self._interfaces:
            peer = next(n for n in self.cluster.all_nodes() if n.name != name)
            node = self.cluster.node(name)
            output = node.run(route_command(peer.address), timeout=COMMAND_TIMEOUT_S).output
            self._interfaces[name] = parse_route_interface(output)
        return self._interfaces[name]

    def apply(
        self, names: Sequence[str], spec: NetemSpec
    ) -> tuple[dict[str, str], dict[str, BaseException]]:
        """Shape every named node; (node -> interface shaped, node -> failure)."""
        self.require_support()

        def shape(name: str) -> str:
            interface = self.interface(name)
            command = shape_command(interface, spec)
            result = self.cluster.node(name).run(command, timeout=COMMAND_TIMEOUT_S, check=False)
            if result.ok:
                return interface
            if _NO_NETEM.search(result.output):
                raise UnsupportedFaultError(
                    f"{name}: the kernel has no netem qdisc (`{command}`: "
                    f"{result.output.strip()}); load it on the host with `modprobe sch_netem`"
                )
            raise NodeCommandError(name, result.command, result.exit_code, result.output)

        return on_each_node(names, shape)

    def clear(self, names: Sequence[str]) -> tuple[dict[str, str], dict[str, BaseException]]:
        """Remove netem from every named node (fine where there is none)."""
        self.require_support()

        def clear(name: str) -> str:
            interface = self.interface(name)
            result = self.cluster.node(name).run(
                clear_command(interface), timeout=COMMAND_TIMEOUT_S, check=False
            )
            if result.ok:
                return "cleared"
            if is_no_qdisc_error(result.output):
                return "none"
            raise NodeCommandError(name, result.command, result.exit_code, result.output)

        return on_each_node(names, clear)
