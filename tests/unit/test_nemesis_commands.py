"""The exact iptables and tc commands squall runs on nodes (run for real in tests/docker and,
inside a private network namespace, in tests/integration/test_nemesis_local.py)."""

from __future__ import annotations

import pytest

from nemesis.errors import FaultError
from nemesis.netem import (
    NetemSpec,
    clear_command,
    is_no_qdisc_error,
    netem_command,
    parse_route_interface,
    route_command,
)
from nemesis.partitioner import (
    drop_rule,
    ensure_chain_commands,
    heal_command,
    install_command,
    remove_chain_command,
)


def test_chain_is_created_if_missing_and_jumped_to_first() -> None:
    assert ensure_chain_commands() == [
        "{ iptables -w -n -L SQUALL >/dev/null 2>&1 || iptables -w -N SQUALL; }",
        "{ iptables -w -C INPUT -j SQUALL 2>/dev/null || iptables -w -I INPUT 1 -j SQUALL; }",
    ]


def test_install_replaces_the_rules_with_one_drop_per_source() -> None:
    assert drop_rule("172.28.0.12") == "iptables -w -A SQUALL -s 172.28.0.12 -j DROP"
    assert install_command(["172.28.0.12", "172.28.0.13"]) == (
        "{ iptables -w -n -L SQUALL >/dev/null 2>&1 || iptables -w -N SQUALL; } && "
        "{ iptables -w -C INPUT -j SQUALL 2>/dev/null || iptables -w -I INPUT 1 -j SQUALL; } && "
        "iptables -w -F SQUALL && "
        "iptables -w -A SQUALL -s 172.28.0.12 -j DROP && "
        "iptables -w -A SQUALL -s 172.28.0.13 -j DROP"
    )
    assert install_command([]).endswith("&& iptables -w -F SQUALL")


def test_heal_flushes_only_an_existing_chain() -> None:
    assert heal_command() == (
        "if iptables -w -n -L SQUALL >/dev/null 2>&1; then iptables -w -F SQUALL; fi"
    )
    assert "iptables -w -X SQUALL" in remove_chain_command()
    assert "iptables -w -D INPUT -j SQUALL" in remove_chain_command()


def test_netem_commands() -> None:
    spec = NetemSpec(delay_ms=100, jitter_ms=20, distribution="normal", loss_pct=5)
    # squall's netem carries a handle of its own (issue 17), so that a heal deletes only it.
    assert netem_command("eth0", spec) == (
        "tc qdisc replace dev eth0 root handle 5151: netem delay 100ms 20ms distribution normal "
        "loss 5%"
    )
    assert netem_command("ens3", NetemSpec(delay_ms=50, jitter_ms=0)) == (
        "tc qdisc replace dev ens3 root handle 5151: netem delay 50ms loss 0%"
    )
    assert netem_command("eth1", NetemSpec(loss_pct=0.5, distribution=None)) == (
        "tc qdisc replace dev eth1 root handle 5151: netem delay 0ms loss 0.5%"
    )
    assert netem_command("eth0", NetemSpec(delay_ms=10, jitter_ms=2.5, distribution=None)) == (
        "tc qdisc replace dev eth0 root handle 5151: netem delay 10ms 2.5ms loss 0%"
    )
    assert clear_command("eth0") == "tc qdisc del dev eth0 root handle 5151:"
    assert clear_command("eth0.100@if7") == "tc qdisc del dev eth0.100@if7 root handle 5151:"
    with pytest.raises(FaultError, match="not a network interface name"):
        clear_command("eth0; reboot")
    with pytest.raises(FaultError, match="not a network interface name"):
        netem_command("$(reboot)", spec)


def test_interface_from_ip_route_get() -> None:
    assert route_command("172.28.0.12") == "ip -o route get 172.28.0.12"
    assert route_command("x; reboot") == "ip -o route get 'x; reboot'"
    output = "172.28.0.12 dev eth0 src 172.28.0.11 uid 0 \\    cache "
    assert parse_route_interface(output) == "eth0"
    assert parse_route_interface("10.1.2.3 via 10.0.0.1 dev ens5 src 10.0.0.7 uid 1000") == "ens5"
    with pytest.raises(FaultError, match="cannot find the interface"):
        parse_route_interface("RTNETLINK answers: Network is unreachable")
    for bad in ("$(reboot)", "eth0;reboot", "a-very-long-interface-name", "`id`"):
        with pytest.raises(FaultError, match="not a network interface name"):
            parse_route_interface(f"10.0.0.2 dev {bad} src 10.0.0.1 uid 0")


def test_missing_qdisc_is_not_an_error() -> None:
    assert is_no_qdisc_error("Error: Cannot delete qdisc with handle of zero.")
    assert is_no_qdisc_error("RTNETLINK answers: No such file or directory")
    assert not is_no_qdisc_error('Cannot find device "eth9"')
    # deleting squall's handle where another root qdisc is: not squall's, left alone
    assert is_no_qdisc_error("Error: Invalid handle.")
    assert is_no_qdisc_error("RTNETLINK answers: Invalid argument")


def test_netem_spec_round_trip() -> None:
    spec = NetemSpec(delay_ms=100, jitter_ms=20, distribution="pareto", loss_pct=1)
    assert NetemSpec.from_value(spec.to_value()) == spec
    assert NetemSpec.from_value({"delay_ms": 5, "distribution": None}).distribution is None
