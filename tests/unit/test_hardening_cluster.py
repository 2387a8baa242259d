"""Issue 17 (hardening) of the cluster runtimes: no name a node or an inventory chooses
reaches a shell unquoted or a path outside its place, and the ssh runtime undoes what it
changed on real hosts. The shell snippets run here for real, against stub commands."""

from __future__ import annotations

import json
import os
import socket
import stat
import subprocess
from collections.abc import Sequence
from pathlib import Path

import paramiko
import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from nemesis.netem import (
    NetemSpec,
    clear_command,
    foreign_qdisc_guard,
    is_no_qdisc_error,
    shape_command,
)
from nemesis.partitioner import CHAIN, remove_chain_command
from nemesis.protocols import Capabilities
from squall.cluster import ssh_runtime
from squall.cluster.cluster import Cluster, ClusterState, NodeState, state_dir
from squall.cluster.node import Command, CommandFailed, CommandResult, NodeError, render
from squall.cluster.owner import Owner
from squall.cluster.ssh import SshNode
from squall.cluster.ssh_runtime import (
    ROOT_MARKER,
    Alternative,
    FaultSupportError,
    SshRuntime,
    _load_alternatives,
    _probe,
    check_fault_support,
    claim_root_command,
    import_check_command,
    netem_probe_command,
    parse_alternative,
    remove_run_directories_command,
)


def public_key() -> str:
    raw = (
        Ed25519PrivateKey.generate()
        .public_key()
        .public_bytes(serialization.Encoding.OpenSSH, serialization.PublicFormat.OpenSSH)
    )
    return raw.decode()


# --- 14: SFTP downloads keep to the target directory -------------------------------------


class FakeSftp:
    """An SFTP server's view of a tree: {path: bytes or None (a directory)}."""

    def __init__(self, tree: dict[str, bytes | None]) -> None:
        self.tree = tree
        self.fetched: list[str] = []

    def _attrs(self, name: str, path: str) -> paramiko.SFTPAttributes:
        attrs = paramiko.SFTPAttributes()
        attrs.filename = name
        attrs.st_mode = (
            (stat.S_IFDIR | 0o755) if self.tree[path] is None else (stat.S_IFREG | 0o644)
        )
        return attrs

    def stat(self, path: str) -> paramiko.SFTPAttributes:
        return self._attrs(path.rsplit("/", 1)[-1], path)

    def listdir_attr(self, path: str) -> list[paramiko.SFTPAttributes]:
        prefix = path.rstrip("/") + "/"
        names = [p[len(prefix) :] for p in self.tree if p.startswith(prefix)]
        return [self._attrs(n, prefix + n) for n in names if "/" not in n]

    def get(self, remote: str, local: str) -> None:
        self.fetched.append(remote)
        content = self.tree.get(remote)
        Path(local).write_bytes(content if content is not None else b"")


class ListingSftp(FakeSftp):
    """A node that lists whatever names it likes in /logs."""

    def __init__(self, names: list[str]) -> None:
        super().__init__({"/logs": None, **{f"/logs/{n}": b"evil" for n in names}})

    def listdir_attr(self, path: str) -> list[paramiko.SFTPAttributes]:
        return [self._attrs(p[len("/logs/") :], p) for p in self.tree if p.startswith("/logs/")]


@pytest.fixture
def ssh_node(tmp_path: Path) -> SshNode:
    return SshNode("n1", "192.0.2.11", host_key=public_key(), key_file=tmp_path / "id")


def fetch(node: SshNode, sftp: FakeSftp, local: Path) -> None:
    node._fetch(sftp, "/logs", sftp.stat("/logs"), local)


def test_a_downloaded_tree_lands_in_its_directory(ssh_node: SshNode, tmp_path: Path) -> None:
    sftp = FakeSftp({"/logs": None, "/logs/a.log": b"a", "/logs/sub": None, "/logs/sub/b": b"b"})
    fetch(ssh_node, sftp, tmp_path / "run")
    assert (tmp_path / "run" / "a.log").read_bytes() == b"a"
    assert (tmp_path / "run" / "sub" / "b").read_bytes() == b"b"


@pytest.mark.parametrize("name", ["../escaped", "..", ".", "{tmp}/escaped", "a/../../escaped", ""])
def test_names_a_node_sends_cannot_leave_the_directory(
    ssh_node: SshNode, tmp_path: Path, name: str
) -> None:
    sftp = ListingSftp([name.format(tmp=tmp_path)])  # an absolute name: inside tmp_path
    with pytest.raises(NodeError, match="refused"):
        fetch(ssh_node, sftp, tmp_path / "run" / "logs")
    assert sftp.fetched == []
    assert not (tmp_path / "run" / "escaped").exists()
    assert not (tmp_path / "escaped").exists()


def test_a_name_through_a_symlink_out_of_the_directory_is_refused(
    ssh_node: SshNode, tmp_path: Path
) -> None:
    target = tmp_path / "run"
    target.mkdir()
    (tmp_path / "outside").mkdir()
    (target / "link").symlink_to(tmp_path / "outside" / "file")
    sftp = FakeSftp({"/logs": None, "/logs/link": b"evil"})
    with pytest.raises(NodeError, match="refused"):
        fetch(ssh_node, sftp, target)
    assert list((tmp_path / "outside").iterdir()) == []


# --- nodes that answer from a script -----------------------------------------------------


LOST = -1
"""A rule's exit code that makes the command raise, as a lost connection does."""


class ScriptedNode:
    """A node whose commands answer from (substring, exit code, output) rules, first match
    wins (else exit 0, no output); it records every command."""

    def __init__(self, name: str, address: str, rules: Sequence[tuple[str, int, str]] = ()) -> None:
        self._name = name
        self._address = address
        self.rules = list(rules)
        self.commands: list[str] = []

    @property
    def name(self) -> str:
        return self._name

    @property
    def address(self) -> str:
        return self._address

    def run(self, command: Command, *, timeout: float = 60, check: bool = True) -> CommandResult:
        text = render(command)
        self.commands.append(text)
        code, output = next(((c, o) for s, c, o in self.rules if s in text), (0, ""))
        if code == LOST:
            raise NodeError(f"{self._name}: connection lost while running `{text}`")
        if check and code:
            raise CommandFailed(self._name, text, code, output)
        return CommandResult(text, code, output, 0.0)

    def daemon_running(self, pidfile: str) -> bool:
        return False

    def signal_daemon(self, pidfile: str, signal_name: str) -> bool:
        return False

    def close(self) -> None:
        pass


ROUTE = "10.0.0.2 dev eth0 src 10.0.0.1 uid 0 \\    cache "
QUERY_NFT = """\
Name: iptables
Link: /usr/sbin/iptables
Slaves:
 iptables-restore /usr/sbin/iptables-restore
 iptables-save /usr/sbin/iptables-save
Status: auto
Best: /usr/sbin/iptables-nft
Value: /usr/sbin/iptables-nft

Alternative: /usr/sbin/iptables-legacy
Priority: 10
Slaves:
 iptables-restore /usr/sbin/iptables-legacy-restore

Alternative: /usr/sbin/iptables-nft
Priority: 20
"""


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("SQUALL_HOME", str(tmp_path / "home"))
    return tmp_path / "home"


def scripted_cluster(
    run_id: str = "r1",
    rules: dict[str, list[tuple[str, int, str]]] | None = None,
    *,
    netem: bool = True,
    owner: str | None = None,
) -> tuple[Cluster, dict[str, ScriptedNode]]:
    rules = rules or {}
    addresses = {"n1": "10.0.0.1", "n2": "10.0.0.2", "zk1": "10.0.0.3"}
    nodes = {n: ScriptedNode(n, a, rules.get(n, [])) for n, a in addresses.items()}
    states = [NodeState(n, a, key_file="k", host_key="h") for n, a in addresses.items()]
    state = ClusterState(run_id, "ssh", brokers=states[:2], zookeeper=states[2], owner=owner)
    capabilities = Capabilities("ssh", partitions=True, freeze=False, netem=netem)
    cluster = Cluster(
        state,
        {"n1": nodes["n1"], "n2": nodes["n2"]},  # type: ignore[dict-item]
        nodes["zk1"],  # type: ignore[arg-type]
        capabilities=capabilities,
    )
    return cluster, nodes


# --- 4: inventory values reach no shell unquoted, nothing is deleted outside squall's root --


def sh(script: str, cwd: Path, path: Path | None = None) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ)
    if path is not None:
        env["PATH"] = f"{path}:{env['PATH']}"
    return subprocess.run(
        ["sh", "-c", script], cwd=cwd, env=env, capture_output=True, text=True, timeout=30
    )


@pytest.mark.parametrize(
    "root", ["/", "/usr", "/etc/", "//var", "/opt", "/tmp", "relative", "/a/../"]
)
def test_no_recursive_delete_under_a_system_directory(root: str) -> None:
    with pytest.raises(ValueError, match=f"root {root!r}"):
        remove_run_directories_command(root)
    with pytest.raises(ValueError, match=f"root {root!r}"):
        claim_root_command(root)


def test_run_directories_are_deleted_only_under_a_marked_root(tmp_path: Path) -> None:
    root = tmp_path / "squall root $(touch pwned)"
    for sub in ("data/logs", "logs", "run", "config", "sut/system_under_test"):
        (root / sub).mkdir(parents=True)
    (root / "keep.txt").write_text("an administrator's file")
    refused = sh(remove_run_directories_command(str(root)), tmp_path)
    assert refused.returncode == 3 and "not squall's" in refused.stdout
    assert (root / "data" / "logs").is_dir()
    (root / ROOT_MARKER).write_text("")
    done = sh(remove_run_directories_command(str(root)), tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    assert sorted(p.name for p in root.iterdir()) == [ROOT_MARKER, "keep.txt", "sut"]
    assert not (tmp_path / "pwned").exists()


def test_a_root_becomes_squalls_only_when_new_empty_or_an_earlier_squalls(tmp_path: Path) -> None:
    new = tmp_path / "new root; touch pwned"
    assert sh(claim_root_command(str(new)), tmp_path).returncode == 0
    assert (new / ROOT_MARKER).is_file()
    assert sh(claim_root_command(str(new)), tmp_path).returncode == 0  # idempotent
    empty = tmp_path / "empty"
    empty.mkdir()
    assert sh(claim_root_command(str(empty)), tmp_path).returncode == 0
    assert (empty / ROOT_MARKER).is_file()
    earlier = tmp_path / "earlier"
    (earlier / "sut" / "system_under_test").mkdir(parents=True)
    assert sh(claim_root_command(str(earlier)), tmp_path).returncode == 0
    assert (earlier / ROOT_MARKER).is_file()
    foreign = tmp_path / "srv"
    (foreign / "data").mkdir(parents=True)
    refused = sh(claim_root_command(str(foreign)), tmp_path)
    assert refused.returncode == 3
    assert f"touch {foreign}/{ROOT_MARKER}" in refused.stdout
    assert not (foreign / ROOT_MARKER).exists()
    assert not (tmp_path / "pwned").exists()


def test_the_python_of_a_node_is_quoted(tmp_path: Path) -> None:
    command = import_check_command(str(tmp_path / "sut dir"), "python3; touch pwned")
    assert command == (
        f"cd '{tmp_path}/sut dir' && PYTHONPATH='{tmp_path}/sut dir' 'python3; touch pwned' -c "
        "'import kazoo.client, system_under_test.server'"
    )
    (tmp_path / "sut dir").mkdir()
    assert sh(command, tmp_path).returncode != 0
    assert not (tmp_path / "sut dir" / "pwned").exists()


def test_the_probe_quotes_the_peer_and_checks_the_interface_a_node_names(home: Path) -> None:
    cluster, nodes = scripted_cluster(rules={"n1": [("ip -o route get", 0, "x dev $(reboot) y")]})
    nodes["n2"]._address = "10.0.0.2; reboot"
    netem_missing = _probe(cluster, "n1", {})
    assert "ip -o route get '10.0.0.2; reboot'" in nodes["n1"].commands
    assert "not a network interface name" in netem_missing
    assert not any("tc " in c for c in nodes["n1"].commands)


# --- 7: the iptables alternative is switched only when it can be, and is recorded ---------


def test_the_alternative_is_read_from_update_alternatives() -> None:
    previous = parse_alternative(QUERY_NFT)
    assert previous == Alternative("auto", "/usr/sbin/iptables-nft")
    assert previous.restore_command() == "update-alternatives --auto iptables"
    manual = Alternative("manual", "/usr/sbin/iptables-nft")
    assert manual.restore_command() == "update-alternatives --set iptables /usr/sbin/iptables-nft"
    assert parse_alternative("update-alternatives: error: no alternatives for iptables") is None
    assert parse_alternative("Status: manual\nValue: /x; reboot\n") is None


NFT_FAILS = ("iptables -w -L -n", 1, "iptables v1.8.9 (nf_tables): Could not fetch rule set")


def test_a_switch_to_legacy_records_the_alternative_it_replaced(home: Path) -> None:
    legacy = ("update-alternatives --set iptables /usr/sbin/iptables-legacy", 0, "")
    query = ("update-alternatives --query iptables", 0, QUERY_NFT)
    cluster, nodes = scripted_cluster(
        rules={"n1": [legacy, NFT_FAILS, query, ("ip -o route get", 0, ROUTE)]}
    )
    for name in ("n2", "zk1"):
        nodes[name].rules.append(("ip -o route get", 0, ROUTE))
    check_fault_support(cluster)
    doc = json.loads((home / "capabilities" / "r1.json").read_text())
    assert doc["iptables_alternatives"] == {
        "n1": {"status": "auto", "value": "/usr/sbin/iptables-nft"}
    }
    assert _load_alternatives("r1") == {"n1": Alternative("auto", "/usr/sbin/iptables-nft")}
    assert not any("update-alternatives" in c for c in nodes["n2"].commands)


def test_no_switch_to_legacy_that_could_not_be_undone(home: Path) -> None:
    query = ("update-alternatives --query iptables", 2, "update-alternatives: unknown option")
    cluster, nodes = scripted_cluster(rules={"n1": [query, NFT_FAILS]})
    with pytest.raises(FaultSupportError, match="only when it can switch it back"):
        _probe(cluster, "n1", {})
    assert not any("--set" in c for c in nodes["n1"].commands)


def test_a_useless_switch_to_legacy_is_undone_at_once(home: Path) -> None:
    query = ("update-alternatives --query iptables", 0, QUERY_NFT)
    legacy = ("iptables-legacy", 1, "iptables-legacy: permission denied")
    cluster, nodes = scripted_cluster(rules={"n1": [query, legacy, NFT_FAILS]})
    with pytest.raises(FaultSupportError, match="iptables does not work"):
        _probe(cluster, "n1", {})
    assert nodes["n1"].commands[-1] == "update-alternatives --auto iptables"


def test_a_failed_probe_still_records_the_switches_made(home: Path) -> None:
    legacy = ("update-alternatives --set iptables /usr/sbin/iptables-legacy", 0, "")
    query = ("update-alternatives --query iptables", 0, QUERY_NFT)
    cluster, _ = scripted_cluster(
        rules={
            "n1": [legacy, NFT_FAILS, query, ("ip -o route get", LOST, "")],
            "n2": [("iptables", 1, "Permission denied (you must be root)")],
        }
    )
    with pytest.raises((FaultSupportError, NodeError)):
        check_fault_support(cluster)
    assert _load_alternatives("r1") == {"n1": Alternative("auto", "/usr/sbin/iptables-nft")}


# --- 7: squall's netem only: never over, and never deleting, another root qdisc ----------


TC_STUB = """#!/bin/sh
echo "$*" >> "$TC_LOG"
if [ "$1 $2" = "qdisc show" ]; then printf '%s\\n' "$TC_ROOT" 'qdisc fq_codel 0: parent :1'; fi
"""


@pytest.fixture
def tc_stub(tmp_path: Path) -> Path:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "tc").write_text(TC_STUB)
    (bin_dir / "tc").chmod(0o755)
    return bin_dir


def run_with_tc(tc_stub: Path, script: str, root_qdisc: str) -> tuple[int, str, list[str]]:
    log = tc_stub.parent / "tc.log"
    log.unlink(missing_ok=True)
    env = {**os.environ, "PATH": f"{tc_stub}:{os.environ['PATH']}", "TC_LOG": str(log)}
    env["TC_ROOT"] = root_qdisc
    done = subprocess.run(["sh", "-c", script], env=env, capture_output=True, text=True)
    calls = log.read_text().splitlines() if log.exists() else []
    return done.returncode, done.stdout + done.stderr, calls


@pytest.mark.parametrize(
    "root_qdisc",
    [
        "",
        "qdisc noqueue 0: root refcnt 2",
        "qdisc mq 0: root",
        "qdisc fq_codel 0: root refcnt 2 limit 10240p flows 1024",
        "qdisc netem 5151: root refcnt 2 limit 1000 delay 100ms",
    ],
)
def test_netem_goes_over_the_kernels_default_or_squalls_own(tc_stub: Path, root_qdisc: str) -> None:
    spec = NetemSpec(delay_ms=100)
    code, output, calls = run_with_tc(tc_stub, shape_command("eth0", spec), root_qdisc)
    assert code == 0, output
    assert calls[-1] == "qdisc replace dev eth0 root handle 5151: netem delay 100ms loss 0%"
    code, output, calls = run_with_tc(tc_stub, netem_probe_command("eth0"), root_qdisc)
    assert code == 0, output
    assert calls[-2:] == [
        "qdisc add dev eth0 root handle 5151: netem delay 1ms",
        "qdisc del dev eth0 root handle 5151:",
    ]


@pytest.mark.parametrize(
    "root_qdisc",
    [
        "qdisc htb 1: root refcnt 2 r2q 10 default 0x10",
        "qdisc netem 8001: root refcnt 2 limit 1000",
    ],
)
def test_netem_never_replaces_an_administrators_root_qdisc(tc_stub: Path, root_qdisc: str) -> None:
    for script in (shape_command("eth0", NetemSpec(delay_ms=100)), netem_probe_command("eth0")):
        code, output, calls = run_with_tc(tc_stub, script, root_qdisc)
        assert code == 3
        assert "root qdisc that squall did not set up" in output
        assert calls == ["qdisc show dev eth0"]


def _namespace_tc() -> str | None:
    try:
        probe = subprocess.run(
            [
                "unshare",
                "-rn",
                "tc",
                "qdisc",
                "replace",
                "dev",
                "lo",
                "root",
                "handle",
                "1:",
                "pfifo",
            ],
            capture_output=True,
            timeout=10,
        )
    except (OSError, subprocess.TimeoutExpired) as err:
        return f"no unshare: {err}"
    return None if probe.returncode == 0 else f"no tc in a private namespace: {probe.stderr!r}"


_NAMESPACE_TC = _namespace_tc()


@pytest.mark.skipif(_NAMESPACE_TC is not None, reason=_NAMESPACE_TC or "")
def test_clearing_deletes_squalls_qdisc_only_for_real_in_a_private_namespace() -> None:
    """pfifo stands in for netem (which this kernel may lack): the handle is what counts."""
    script = "\n".join(
        [
            "tc qdisc replace dev lo root handle 1: pfifo",  # the administrator's
            f"{clear_command('lo')} 2>&1 | sed 's/^/cleared: /'",
            "tc qdisc show dev lo",
            f"( {foreign_qdisc_guard('lo')} ) 2>/dev/null; echo guard=$?",
            "tc qdisc replace dev lo root handle 5151: pfifo",  # squall's
            clear_command("lo"),
            "tc qdisc show dev lo | grep -c 5151: ; true",
        ]
    )
    done = subprocess.run(["unshare", "-rn", "sh", "-c", script], capture_output=True, text=True)
    lines = done.stdout.splitlines()
    assert lines[0].startswith("cleared: ") and is_no_qdisc_error(lines[0])
    assert lines[1].startswith("qdisc pfifo 1: root")
    assert lines[2:] == ["guard=3", "0"], done.stdout + done.stderr


# --- 6: down and clean undo squall's changes on the hosts --------------------------------


def down_rules(restore_exit: int = 0) -> dict[str, list[tuple[str, int, str]]]:
    common = [
        (remove_chain_command(), 0, ""),
        ("ip -o route get", 0, ROUTE),
        ("tc qdisc del dev eth0 root handle 5151:", 2, "Error: Invalid handle."),
        (f"iptables -w -n -L {CHAIN}", 1, "iptables: No chain/target/match by that name."),
    ]
    n1 = [
        (remove_chain_command(), 0, ""),
        ("update-alternatives --auto iptables", restore_exit, "" if not restore_exit else "nope"),
        ("tc qdisc del dev eth0 root handle 5151:", 0, ""),
        *common,
    ]
    n1 = [r for r in n1 if not r[0].startswith("iptables -w -n -L")]
    return {"n1": n1, "n2": list(common), "zk1": list(common)}


def record_alternative(run_id: str) -> None:
    path = state_dir() / "capabilities" / f"{run_id}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    alternative = {"n1": {"status": "auto", "value": "/usr/sbin/iptables-nft"}}
    path.write_text(json.dumps({"netem": True, "iptables_alternatives": alternative}))


def test_down_removes_the_chain_squalls_netem_and_puts_the_alternative_back(
    home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    cluster, nodes = scripted_cluster(rules=down_rules())
    cluster.state.save()
    record_alternative("r1")
    monkeypatch.setattr(SshRuntime, "attach", lambda self, state: cluster)
    removed = SshRuntime().down(cluster.state)
    assert removed == [
        "iptables chain SQUALL on n1",
        "netem qdisc on n1",
        "iptables alternative on n1 put back to /usr/sbin/iptables-nft (auto)",
    ]
    for node in nodes.values():
        assert remove_chain_command() in node.commands
        assert clear_command("eth0") in node.commands
    n1 = nodes["n1"].commands
    # the chain lives in legacy's tables: removed before iptables points elsewhere
    assert n1.index(remove_chain_command()) < n1.index("update-alternatives --auto iptables")
    assert not any("update-alternatives" in c for c in nodes["n2"].commands)
    assert not (home / "clusters" / "r1.json").exists()
    assert not (home / "capabilities" / "r1.json").exists()


def test_a_failed_undo_keeps_the_state_for_clean(
    home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    cluster, _ = scripted_cluster(rules=down_rules(restore_exit=2))
    cluster.state.save()
    record_alternative("r1")
    monkeypatch.setattr(SshRuntime, "attach", lambda self, state: cluster)
    with pytest.raises(NodeError, match="could not undo squall's changes on n1"):
        SshRuntime().down(cluster.state)
    assert (home / "clusters" / "r1.json").exists()
    assert (home / "capabilities" / "r1.json").exists()
    assert SshRuntime().clean("r1")[0].startswith("nothing of ssh cluster r1: ")


def test_clean_takes_down_the_clusters_of_gone_owners_only(
    home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    gone = f"someone@{socket.gethostname()}:999999999:1"
    clusters = {
        "gone": scripted_cluster("gone", down_rules(), owner=gone),
        "live": scripted_cluster("live", down_rules(), owner=Owner.current().label()),
    }
    for cluster, _ in clusters.values():
        cluster.state.save()
    monkeypatch.setattr(SshRuntime, "attach", lambda self, state: clusters[state.run_id][0])
    assert SshRuntime().clean() == ["iptables chain SQUALL on n1", "netem qdisc on n1"]
    assert remove_chain_command() in clusters["gone"][1]["n1"].commands
    assert clusters["live"][1]["n1"].commands == []
    assert not (home / "clusters" / "gone.json").exists()
    assert (home / "clusters" / "live.json").exists()
    assert SshRuntime().clean("live") == ["iptables chain SQUALL on n1", "netem qdisc on n1"]


# --- 15: .squall/current is replaced atomically ------------------------------------------


def test_a_crash_while_naming_the_current_cluster_keeps_the_old_name(
    home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    cluster, _ = scripted_cluster("first")
    cluster.state.save()
    real_fsync = os.fsync

    def fsync(fd: int) -> None:
        if os.path.basename(os.readlink(f"/proc/self/fd/{fd}")).startswith(".current"):
            raise OSError(28, "No space left on device")
        real_fsync(fd)

    monkeypatch.setattr(os, "fsync", fsync)
    second, _ = scripted_cluster("second")
    with pytest.raises(OSError, match="No space left"):
        second.state.save()
    assert (home / "current").read_text() == "first\n"
    assert sorted(p.name for p in home.iterdir()) == ["clusters", "current"]


def test_up_claims_the_roots_first_and_deletes_only_under_squalls(
    home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "id").write_text("unused")
    key = public_key()
    inventory = tmp_path / "hosts.toml"
    inventory.write_text(
        f'[defaults]\nkey_file = "id"\nhost_key = "{key}"\nroot = "/srv/squall"\n'
        '[[brokers]]\nname = "n1"\nhost = "10.0.0.1"\n[[brokers]]\nname = "n2"\n'
        'host = "10.0.0.2"\n[zookeeper]\nhost = "10.0.0.3"\n'
    )
    rules = [("ip -o route get", 0, ROUTE)]
    cluster, nodes = scripted_cluster(rules={n: list(rules) for n in ("n1", "n2", "zk1")})
    monkeypatch.setattr(ssh_runtime, "ssh_cluster", lambda state: cluster)
    monkeypatch.setattr(ssh_runtime, "deploy_system_under_test", lambda cluster, say: None)
    SshRuntime().up("r1", inventory=inventory)
    for node in nodes.values():
        assert node.commands[1] == claim_root_command("/srv/squall")  # after `true`
        deletes = [c for c in node.commands if "rm -rf" in c]
        assert deletes == [remove_run_directories_command("/srv/squall")]
        assert deletes[0].startswith("if [ ! -f /srv/squall/.squall-root ]; then")
