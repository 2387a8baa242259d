"""Nodes reached over SSH with paramiko, as Jepsen's control node reaches its nodes.

``SshNode`` implements the ``Node`` protocol against one host: commands run under a remote
``timeout --signal=KILL`` with stdout and stderr merged and read as they come, files move
over SFTP, daemons are ``setsid nohup`` processes tracked by pidfile. The host key is pinned
(RejectPolicy, never trust-on-first-use). One SSH connection per node is shared by all
threads; each command is its own channel on it, so commands on one node run concurrently.

``SshRuntime`` is the ``ssh`` runtime (existing hosts from an inventory file); its steps
after provisioning (reach the nodes, check iptables and netem, deploy ZooKeeper and the
brokers) are the docker runtime's too.
"""

from __future__ import annotations

import base64
import binascii
import contextlib
import logging
import os
import re
import shlex
import socket
import stat
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path, PurePosixPath

import paramiko

from squall.cluster.cluster import (
    NodeState,
)
from squall.cluster.node import (
    DEFAULT_TIMEOUT_S,
    Command,
    CommandFailed,
    CommandResult,
    CommandTimedOut,
    DaemonSpec,
    NodeError,
    render,
)

TIMEOUT_EXIT_CODES = (124, 137)
"""coreutils ``timeout``: 124 when the command timed out, 137 (128 + KILL) with ``--signal=KILL``."""
LOCAL_GRACE_S = 5.0
"""How long past its deadline a command may stay silent before the local side gives up on it
(the remote ``timeout`` cannot fire on a frozen node)."""
SKIPPED_NAMES = frozenset({"__pycache__"})
_SIGNAL = re.compile(r"^[A-Z][A-Z0-9]*$")
_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_NOT_RUNNING = 3

# paramiko logs every failed connection attempt with a traceback; retries are expected while
# sshd starts, so its records reach stderr only if the application configured logging.
logging.getLogger("paramiko").addHandler(logging.NullHandler())


class SshError(NodeError):
    """An SSH connection could not be made or was lost."""


class SshConnectError(SshError):
    """The host did not accept an SSH connection in time."""


class HostKeyError(SshError):
    """The host's key is not the pinned one, or none is pinned."""


class SshAuthError(SshError):
    """The host refused the client key, or the key file cannot be read."""


def parse_host_key(text: str) -> paramiko.PKey:
    """``<type> <base64> [comment]`` (an OpenSSH public key line) as a paramiko key."""
    parts = text.split()
    if len(parts) < 2:
        raise ValueError(f"not an OpenSSH public key `<type> <base64>`: {text!r}")
    try:
        return paramiko.PKey.from_type_string(parts[0], base64.b64decode(parts[1]))
    except (binascii.Error, paramiko.SSHException, paramiko.UnknownKeyType) as err:
        raise ValueError(f"not a usable {parts[0]} public key: {err}") from None


class SshNode:
    """A node reached over SSH; implements ``squall.cluster.node.Node``."""

    def __init__(
        self,
        name: str,
        address: str,
        *,
        host_key: str,
        key_file: str | Path,
        port: int = 22,
        user: str = "root",
        connect_timeout: float = 10.0,
        connect_wait: float = 30.0,
    ) -> None:
        self._name = name
        self._address = address
        self.port = port
        self.user = user
        self.key_file = Path(key_file).expanduser()
        self.connect_timeout = connect_timeout
        self.connect_wait = connect_wait
        try:
            self._host_key = parse_host_key(host_key)
        except ValueError as err:
            raise HostKeyError(f"{name}: pinned host key {err}") from None
        self._pkey: paramiko.PKey | None = None
        self._client: paramiko.SSHClient | None = None
        self._lock = threading.Lock()

    @classmethod
    def from_state(cls, state: NodeState, **options: float) -> SshNode:
        if not state.host_key:
            raise HostKeyError(
                f"{state.name}: no pinned host key in the cluster state; add `host_key` (or "
                "`known_hosts`) to the inventory, or bring the cluster up again"
            )
        if not state.key_file:
            raise SshAuthError(f"{state.name}: no key file in the cluster state")
        return cls(
            state.name,
            state.address,
            host_key=state.host_key,
            key_file=state.key_file,
            port=state.ssh_port,
            user=state.user,
            **options,
        )

    @property
    def name(self) -> str:
        return self._name

    @property
    def address(self) -> str:
        return self._address

    def __repr__(self) -> str:
        return f"SshNode({self._name!r}, {self.user}@{self._address}:{self.port})"

    # --- connection --------------------------------------------------------------------

    def _private_key(self) -> paramiko.PKey:
        if self._pkey is None:
            try:
                self._pkey = paramiko.PKey.from_path(self.key_file)
            except (OSError, paramiko.SSHException, paramiko.UnknownKeyType) as err:
                raise SshAuthError(
                    f"{self._name}: cannot read the SSH key {self.key_file}: {err}; point "
                    "`key_file` at an unencrypted OpenSSH private key"
                ) from None
        return self._pkey

    def _transport(self, wait: float | None = None) -> paramiko.Transport:
        """The live connection, made (or remade, if it dropped) on demand, trying for at most
        ``wait`` seconds (``connect_wait`` by default) while sshd comes up."""
        with self._lock:
            if self._client is not None:
                transport = self._client.get_transport()
                if transport is not None and transport.is_active():
                    return transport
                self._client.close()
                self._client = None
            self._client = self._connect(self.connect_wait if wait is None else wait)
            transport = self._client.get_transport()
            assert transport is not None
            return transport

    def _connect(self, wait: float) -> paramiko.SSHClient:
        pkey = self._private_key()
        known_as = self._address if self.port == 22 else f"[{self._address}]:{self.port}"
        deadline = time.monotonic() + min(wait, self.connect_wait)
        while True:
            attempt_timeout = max(1.0, min(self.connect_timeout, deadline - time.monotonic()))
            client = paramiko.SSHClient()
            client.set_missing_host_key_policy(paramiko.RejectPolicy())
            client.get_host_keys().add(known_as, self._host_key.get_name(), self._host_key)
            try:
                client.connect(
                    self._address,
                    port=self.port,
                    username=self.user,
                    pkey=pkey,
                    timeout=attempt_timeout,
                    banner_timeout=attempt_timeout,
                    auth_timeout=attempt_timeout,
                    allow_agent=False,
                    look_for_keys=False,
                )
            except paramiko.BadHostKeyException as err:
                client.close()
                raise HostKeyError(
                    f"{self._name}: {self._address}:{self.port} presented a {err.key.get_name()} "
                    "host key that is not the pinned one; if the host was reinstalled, update "
                    "its host key in the inventory (or bring the docker cluster up again)"
                ) from None
            except paramiko.AuthenticationException as err:
                client.close()
                raise SshAuthError(
                    f"{self._name}: {self.user}@{self._address}:{self.port} refused the key "
                    f"{self.key_file} ({err}); add its public key to ~{self.user}/.ssh/authorized_keys"
                ) from None
            except (OSError, EOFError, paramiko.SSHException) as err:
                client.close()
                if "not found in known_hosts" in str(err):
                    raise HostKeyError(
                        f"{self._name}: {self._address}:{self.port} offers no "
                        f"{self._host_key.get_name()} host key, the pinned key's type"
                    ) from None
                if time.monotonic() >= deadline:
                    raise SshConnectError(
                        f"{self._name}: no SSH connection to {self.user}@{self._address}:"
                        f"{self.port} within {min(wait, self.connect_wait):.0f} s "
                        f"({type(err).__name__}: "
                        f"{err}); is the host up and sshd running?"
                    ) from None
                time.sleep(0.3)
                continue
            transport = client.get_transport()
            if transport is not None:
                transport.set_keepalive(10)
                # Small request/response exchanges: without this, delayed ACKs add ~40 ms each.
                with contextlib.suppress(OSError, AttributeError):
                    transport.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            return client

    def _session(self, deadline: float) -> paramiko.Channel:
        """A new channel by ``deadline`` (monotonic); a dropped connection is remade once."""
        for attempt in (1, 2):
            transport = self._transport(max(0.5, deadline - time.monotonic()))
            wait = max(0.5, min(self.connect_timeout, deadline - time.monotonic()))
            try:
                return transport.open_session(timeout=wait)
            except (EOFError, paramiko.SSHException, OSError) as err:
                transport.close()
                if attempt == 2 or time.monotonic() >= deadline:
                    raise SshError(
                        f"{self._name}: cannot open an SSH channel ({err or type(err).__name__}); "
                        "is the node frozen or down?"
                    ) from None
        raise AssertionError("unreachable")

    def close(self) -> None:
        with self._lock:
            if self._client is not None:
                self._client.close()
                self._client = None

    # --- commands ----------------------------------------------------------------------

    def run(
        self, command: Command, *, timeout: float = DEFAULT_TIMEOUT_S, check: bool = True
    ) -> CommandResult:
        text = render(command)
        # timeout's KILL reaches its own process group, itself included: an outer sh turns
        # that into exit status 137 (else sshd reports a signal, which paramiko drops).
        # stderr joins stdout on the node, so that their lines keep the order they were written.
        limited = f"timeout --signal=KILL {max(timeout, 0.01):.3f} sh -c {shlex.quote(text)} 2>&1"
        wrapped = "sh -c " + shlex.quote(f"{limited}; exit $?")
        started = time.monotonic()
        deadline = started + timeout + LOCAL_GRACE_S
        channel = self._session(deadline)
        chunks: list[bytes] = []
        try:
            channel.set_combine_stderr(True)
            channel.settimeout(0.5)
            try:
                channel.exec_command(wrapped)
            except (EOFError, OSError, paramiko.SSHException) as err:
                raise SshError(f"{self._name}: could not start `{text}`: {err}") from None
            while True:
                try:
                    data = channel.recv(1 << 16)
                except TimeoutError:
                    if time.monotonic() > deadline:
                        raise self._timed_out(text, chunks, -1) from None
                    continue
                if not data:
                    break
                chunks.append(data)
            if not channel.status_event.wait(max(0.0, deadline - time.monotonic())):
                raise self._timed_out(text, chunks, -1)
            exit_code = channel.recv_exit_status()
            self._drain_until_closed(channel, chunks, min(deadline, time.monotonic() + 2.0))
        finally:
            channel.close()
        seconds = time.monotonic() - started
        output = b"".join(chunks).decode(errors="replace")
        if exit_code == -1:
            raise SshError(f"{self._name}: connection lost while running `{text}`")
        if exit_code in TIMEOUT_EXIT_CODES and seconds >= timeout:
            raise CommandTimedOut(self._name, text, exit_code, output)
        if check and exit_code != 0:
            raise CommandFailed(self._name, text, exit_code, output)
        return CommandResult(text, exit_code, output, seconds)

    @staticmethod
    def _drain_until_closed(channel: paramiko.Channel, chunks: list[bytes], until: float) -> None:
        """OpenSSH may send stderr after stdout's EOF; all of it is in by the channel's close."""
        while True:
            data = channel.recv(1 << 16)
            if data:
                chunks.append(data)
            elif channel.closed or time.monotonic() >= until:
                return
            else:
                time.sleep(0.005)

    def _timed_out(self, text: str, chunks: list[bytes], exit_code: int) -> CommandTimedOut:
        return CommandTimedOut(
            self._name, text, exit_code, b"".join(chunks).decode(errors="replace")
        )

    # --- files -------------------------------------------------------------------------

    @contextlib.contextmanager
    def _sftp(self, timeout: float = 120.0) -> Iterator[paramiko.SFTPClient]:
        transport = self._transport()
        sftp = paramiko.SFTPClient.from_transport(transport)
        if sftp is None:
            raise SshError(f"{self._name}: the SFTP subsystem did not start")
        try:
            sftp.get_channel().settimeout(timeout)
            yield sftp
        finally:
            sftp.close()

    def upload(self, local: Path, remote: str) -> None:
        """Copy a file, or a directory tree (without ``__pycache__``), so that ``remote``
        becomes a copy of ``local``."""
        local = Path(local)
        if not local.exists():
            raise NodeError(f"{self._name}: cannot upload {local}: it does not exist")
        base = PurePosixPath(remote)
        directories: list[str] = []
        files: list[tuple[Path, str]] = []
        if local.is_dir():
            for folder, subdirs, names in os.walk(local):
                subdirs[:] = sorted(d for d in subdirs if d not in SKIPPED_NAMES)
                relative = Path(folder).relative_to(local)
                folder_target = base.joinpath(*relative.parts)
                directories.append(str(folder_target))
                files += [(Path(folder) / n, str(folder_target / n)) for n in sorted(names)]
        else:
            directories.append(str(base.parent))
            files.append((local, str(base)))
        self.run("mkdir -p " + " ".join(shlex.quote(d) for d in directories))
        with self._sftp() as sftp:
            for source, target in files:
                try:
                    sftp.put(str(source), target, confirm=False)
                    mode = source.stat().st_mode
                    if mode & 0o111:
                        sftp.chmod(target, stat.S_IMODE(mode))
                except OSError as err:
                    raise NodeError(
                        f"{self._name}: uploading {source} to {target}: {err}"
                    ) from None

    def download(self, remote: str, local: Path) -> None:
        """Copy a file or a directory tree from the node; a missing ``remote`` is skipped."""
        with self._sftp() as sftp:
            try:
                attrs = sftp.stat(remote)
            except FileNotFoundError:
                return
            self._fetch(sftp, remote, attrs, Path(local))

    def _fetch(
        self,
        sftp: paramiko.SFTPClient,
        remote: str,
        attrs: paramiko.SFTPAttributes,
        local: Path,
        top: Path | None = None,
    ) -> None:
        if attrs.st_mode is not None and stat.S_ISDIR(attrs.st_mode):
            local.mkdir(parents=True, exist_ok=True)
            top = top or local.resolve()
            for entry in sftp.listdir_attr(remote):
                if entry.filename not in SKIPPED_NAMES:
                    target = self._local_child(remote, entry.filename, local, top)
                    child = str(PurePosixPath(remote) / entry.filename)
                    self._fetch(sftp, child, entry, target, top)
        else:
            local.parent.mkdir(parents=True, exist_ok=True)
            try:
                sftp.get(remote, str(local))
            except OSError as err:
                raise NodeError(f"{self._name}: downloading {remote} to {local}: {err}") from None

    def _local_child(self, remote: str, name: str, local: Path, top: Path) -> Path:
        """Where the entry ``name`` of the node's directory ``remote`` goes: a plain name
        inside ``local``; a name that would leave ``top`` (the download's target) is refused,
        since the node, not squall, chose it."""
        target = local / name
        if (
            name in ("", ".", "..")
            or "/" in name
            or "\0" in name
            or not target.resolve().is_relative_to(top)
        ):
            raise NodeError(
                f"{self._name}: {remote} lists an entry named {name!r}, which is no plain name "
                f"inside {top}; refused (is the node compromised?)"
            )
        return target

    # --- daemons -----------------------------------------------------------------------

    def start_daemon(self, spec: DaemonSpec) -> int:
        env = dict(spec.env or {})
        bad = [k for k in env if not _ENV_NAME.match(k)]
        if bad:
            raise ValueError(f"{spec.name}: invalid environment variable names {bad}")
        pidfile, logfile = shlex.quote(spec.pidfile), shlex.quote(spec.logfile)
        parents = {str(PurePosixPath(p).parent) for p in (spec.pidfile, spec.logfile)}
        prepare = "mkdir -p " + " ".join(shlex.quote(p) for p in sorted(parents))
        if spec.cwd:
            prepare += f" && cd {shlex.quote(spec.cwd)}"
        assignments = " ".join(f"{k}={shlex.quote(v)}" for k, v in env.items())
        launch = f"env {assignments} " if assignments else ""
        # Appends, so that a restart keeps the log of the crash before it.
        script = (
            f"{prepare} || exit 1\n"
            f"{launch}setsid nohup {shlex.join(spec.command)} >> {logfile} 2>&1 < /dev/null &\n"
            f"echo $! > {pidfile}\necho $!\n"
        )
        result = self.run(script, timeout=30)
        lines = result.output.split()
        if not lines or not lines[-1].isdigit():
            raise NodeError(f"{self._name}: starting {spec.name} printed no pid: {result.output!r}")
        return int(lines[-1])

    @staticmethod
    def _alive_check(pidfile: str) -> str:
        """Shell that exits 3 unless the pidfile names a live, non-zombie process ($pid)."""
        return (
            f"pid=$(cat {shlex.quote(pidfile)} 2>/dev/null) || exit {_NOT_RUNNING}\n"
            f"case \"$pid\" in ''|*[!0-9]*) exit {_NOT_RUNNING};; esac\n"
            "state=$(sed -n 's/^State:[[:space:]]*\\([A-Za-z]\\).*/\\1/p' "
            '"/proc/$pid/status" 2>/dev/null)\n'
            f'case "$state" in ""|Z|X) exit {_NOT_RUNNING};; esac\n'
        )

    def signal_daemon(self, pidfile: str, signal_name: str) -> bool:
        name = signal_name.upper().removeprefix("SIG")
        if not _SIGNAL.match(name):
            raise ValueError(f"not a signal name: {signal_name!r} (KILL, TERM, STOP, CONT...)")
        script = self._alive_check(pidfile) + f'kill -{name} "$pid" || exit {_NOT_RUNNING}\n'
        result = self.run(script, timeout=15, check=False)
        if result.exit_code not in (0, _NOT_RUNNING):
            raise CommandFailed(self._name, result.command, result.exit_code, result.output)
        return result.exit_code == 0

    def daemon_running(self, pidfile: str) -> bool:
        result = self.run(self._alive_check(pidfile), timeout=15, check=False)
        if result.exit_code not in (0, _NOT_RUNNING):
            raise CommandFailed(self._name, result.command, result.exit_code, result.output)
        return result.exit_code == 0


def wait_for_port(host: str, port: int, timeout: float) -> bool:
    """Whether ``host:port`` accepts a TCP connection within ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        with contextlib.suppress(OSError), socket.create_connection((host, port), timeout=1):
            return True
        time.sleep(0.1)
    return False


# --- the ssh runtime ---------------------------------------------------------------------

Progress = Callable[[str], None]
