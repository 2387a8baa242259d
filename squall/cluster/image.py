"""The containers' base image: built here from a debootstrapped Debian, never pulled.

The root filesystem comes from ``debootstrap --variant=minbase`` against the Debian mirror of
this machine's apt sources, is configured for key-only root SSH (host keys made per
container at start), pruned, and ``docker import``ed as ``squall-base:<recipe hash>``. The tag
changes exactly when the recipe does, so an image is built once and then reused.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import re
import shutil
import subprocess
import tempfile
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO

import docker
import docker.errors

RECIPE_VERSION = 1
"""Bump to force a rebuild when something outside ``ImageRecipe``'s fields changes."""
IMAGE_REPOSITORY = "squall-base"
MIRROR_ENV = "SQUALL_DEBIAN_MIRROR"
CACHE_DIR_ENV = "SQUALL_CACHE"
APT_SOURCES = (Path("/etc/apt/sources.list"), Path("/etc/apt/sources.list.d"))
Progress = Callable[[str], None]
"""Receives one-line status messages (the CLI shows them in a rich status line)."""

ENTRY_SCRIPT = """\
#!/bin/sh
# squall: this container's own SSH host key, then sshd in the foreground (under tini).
set -e
[ -s /etc/ssh/ssh_host_ed25519_key ] || ssh-keygen -q -t ed25519 -N '' -f /etc/ssh/ssh_host_ed25519_key
mkdir -p /run/sshd
exec /usr/sbin/sshd -D -e
"""

SSHD_CONFIG = """\
# squall: root by key only; no DNS or PAM (no login session machinery in a container).
HostKey /etc/ssh/ssh_host_ed25519_key
PermitRootLogin prohibit-password
PasswordAuthentication no
KbdInteractiveAuthentication no
UsePAM no
UseDNS no
PrintMotd no
MaxSessions 64
MaxStartups 64:30:128
"""

# ZooKeeper comes from libzookeeper-java (the server jar and its classpath): Debian's
# `zookeeper` package adds only init scripts and depends on the full, X11-linked JRE.
# fuse3 (fusermount3) and libfuse3-3 serve lazyfs, the brokers' disk (``lazy_disk.py``).
# python3-crc32c: CRC-32C of the record batches every broker's log stores (Kafka's).
PACKAGES = (
    "python3",
    "openssh-server",
    "iptables",
    "iproute2",
    "procps",
    "netbase",
    "tini",
    "default-jre-headless",
    "libzookeeper-java",
    "fuse3",
    "libfuse3-3",
    "python3-crc32c",
)

PRUNE = (
    "usr/share/doc",
    "usr/share/man",
    "usr/share/info",
    "usr/share/locale",
    "usr/share/lintian",
    "usr/share/maven-repo",
    "var/cache/apt",
    "var/lib/apt/lists",
    "var/log",
    "etc/ssh/ssh_host_*",
)
"""Paths (globs) under the root filesystem removed before import: docs, caches, host keys."""
_URL_CREDENTIALS = re.compile(r"\b([A-Za-z][A-Za-z0-9+.-]*://)[^/\s@]+@")


def redact(text: str) -> str:
    """``scheme://user:password@host/...`` as ``scheme://***@host/...``: a mirror's
    credentials never reach a message, a progress line or the build log."""
    return _URL_CREDENTIALS.sub(r"\1***@", text)


class ImageError(RuntimeError):
    """The base image could not be built or found."""


class ImagePrerequisiteError(ImageError):
    """Something the build needs is missing on this machine."""


class NoMirrorError(ImagePrerequisiteError):
    """No Debian mirror for the image's suite is configured in the apt sources."""


class ImageBuildError(ImageError):
    """A build step failed; the message names the step and where its log is."""


@dataclass(frozen=True)
class ImageRecipe:
    """Everything that decides the image's content; its digest names the image."""

    suite: str = "bookworm"
    variant: str = "minbase"
    packages: tuple[str, ...] = PACKAGES
    entry_script: str = ENTRY_SCRIPT
    sshd_config: str = SSHD_CONFIG
    prune: tuple[str, ...] = PRUNE
    version: int = RECIPE_VERSION

    def digest(self) -> str:
        """A short hash of the recipe (package order does not matter)."""
        doc = {
            "version": self.version,
            "suite": self.suite,
            "variant": self.variant,
            "packages": sorted(set(self.packages)),
            "entry_script": self.entry_script,
            "sshd_config": self.sshd_config,
            "prune": list(self.prune),
            "changes": _image_changes(self),
        }
        return hashlib.sha256(json.dumps(doc, sort_keys=True).encode()).hexdigest()[:12]

    @property
    def tag(self) -> str:
        return f"{IMAGE_REPOSITORY}:{self.digest()}"

    def debootstrap_args(self, target: Path, mirror: str) -> list[str]:
        return [
            "debootstrap",
            f"--variant={self.variant}",
            f"--include={','.join(self.packages)}",
            self.suite,
            str(target),
            mirror,
        ]


DEFAULT_RECIPE = ImageRecipe()

ENTRY_PATH = "/usr/local/sbin/squall-sshd"


def _image_changes(recipe: ImageRecipe) -> list[str]:
    return [
        "ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
        'ENTRYPOINT ["/usr/bin/tini", "--"]',
        f'CMD ["{ENTRY_PATH}"]',
        "EXPOSE 22",
        f"LABEL squall.recipe-version={recipe.version}",
    ]


# --- apt sources -------------------------------------------------------------------------


@dataclass(frozen=True)
class AptSource:
    """One ``deb`` entry of the apt sources."""

    uri: str
    suites: tuple[str, ...]
    components: tuple[str, ...] = field(default=())


def parse_one_line_sources(text: str) -> list[AptSource]:
    """``deb [options] uri suite component...`` lines (sources.list format)."""
    out: list[AptSource] = []
    for raw in text.splitlines():
        line = raw.split("#", 1)[0].strip()
        if not line:
            continue
        tokens = line.split()
        if tokens[0] != "deb":
            continue
        rest = tokens[1:]
        if rest and rest[0].startswith("["):
            while rest and not rest[0].endswith("]"):
                rest = rest[1:]
            rest = rest[1:]
        if len(rest) < 2:
            continue
        out.append(AptSource(rest[0], (rest[1],), tuple(rest[2:])))
    return out


def parse_deb822_sources(text: str) -> list[AptSource]:
    """Stanzas with ``Types:``, ``URIs:``, ``Suites:``, ``Components:`` (.sources format)."""
    out: list[AptSource] = []
    for stanza in _deb822_stanzas(text):
        if stanza.get("enabled", "yes").lower() == "no":
            continue
        if "deb" not in stanza.get("types", "").split():
            continue
        uris = stanza.get("uris", "").split()
        suites = tuple(stanza.get("suites", "").split())
        if uris and suites:
            out.append(AptSource(uris[0], suites, tuple(stanza.get("components", "").split())))
    return out


def _deb822_stanzas(text: str) -> Iterator[dict[str, str]]:
    fields: dict[str, str] = {}
    key: str | None = None
    for raw in [*text.splitlines(), ""]:
        if raw.startswith("#"):
            continue
        if not raw.strip():
            if fields:
                yield fields
            fields, key = {}, None
        elif raw[0] in " \t" and key is not None:
            fields[key] += " " + raw.strip()
        elif ":" in raw:
            name, value = raw.split(":", 1)
            key = name.strip().lower()
            fields[key] = value.strip()


def find_mirror(sources: Sequence[AptSource], suite: str) -> str | None:
    """The first source carrying ``suite`` itself (not -updates/-security) with ``main``."""
    for source in sources:
        if suite in source.suites and (not source.components or "main" in source.components):
            return source.uri
    return None


def debian_mirror(suite: str, *, locations: Sequence[Path] = APT_SOURCES) -> str:
    """The mirror debootstrap uses: $SQUALL_DEBIAN_MIRROR, else this machine's apt sources."""
    override = os.environ.get(MIRROR_ENV)
    if override:
        return override
    sources: list[AptSource] = []
    files: list[Path] = []
    for location in locations:
        if location.is_dir():
            files += sorted(p for p in location.iterdir() if p.suffix in (".list", ".sources"))
        elif location.exists():
            files.append(location)
    for path in files:
        with contextlib.suppress(OSError, UnicodeDecodeError):
            text = path.read_text()
            parse = parse_deb822_sources if path.suffix == ".sources" else parse_one_line_sources
            sources += parse(text)
    mirror = find_mirror(sources, suite)
    if mirror is None:
        looked = ", ".join(str(p) for p in files) or ", ".join(str(p) for p in locations)
        raise NoMirrorError(
            f"no Debian mirror for `{suite} main` in the apt sources ({looked}); add one "
            f"(`deb <mirror> {suite} main`) or set {MIRROR_ENV} to a mirror URL"
        )
    return mirror


# --- the build ---------------------------------------------------------------------------


def cache_dir() -> Path:
    """Build logs and scratch space: $SQUALL_CACHE, else ~/.cache/squall."""
    base = os.environ.get(CACHE_DIR_ENV)
    if base:
        return Path(base)
    xdg = os.environ.get("XDG_CACHE_HOME")
    return (Path(xdg) if xdg else Path.home() / ".cache") / "squall"


def image_exists(client: docker.DockerClient, tag: str) -> bool:
    try:
        client.images.get(tag)
    except docker.errors.ImageNotFound:
        return False
    return True


def ensure_image(
    client: docker.DockerClient | None = None,
    *,
    recipe: ImageRecipe = DEFAULT_RECIPE,
    progress: Progress | None = None,
) -> str:
    """The image's tag, building it first when no image of this recipe exists.

    A build (once per recipe, about a minute and a half) reports its phases and elapsed time
    to ``progress``; debootstrap's output goes to a log in ``cache_dir()``.
    """
    owned = client is None
    try:
        docker_client = client if client is not None else docker.from_env(timeout=900)
        docker_client.ping()
    except docker.errors.DockerException as err:
        raise ImagePrerequisiteError(f"no Docker engine answers ({err}); start one") from None
    try:
        tag = recipe.tag
        if image_exists(docker_client, tag):
            return tag
        cache = cache_dir()
        cache.mkdir(parents=True, exist_ok=True)
        with _build_lock(cache / f"image-{recipe.digest()}.lock"):
            if not image_exists(docker_client, tag):  # another process may have built it
                ImageBuild(docker_client, recipe, cache, progress).run()
        return tag
    finally:
        if owned:
            docker_client.close()


@contextlib.contextmanager
def _build_lock(path: Path) -> Iterator[None]:
    with path.open("w") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


class ImageBuild:
    """One build: debootstrap, configure, import; each phase timed and shown."""

    def __init__(
        self,
        client: docker.DockerClient,
        recipe: ImageRecipe,
        cache: Path,
        progress: Progress | None,
    ) -> None:
        self.client = client
        self.recipe = recipe
        self.cache = cache
        self.progress = progress
        self.log = cache / f"image-{recipe.digest()}.log"
        self.seconds: dict[str, float] = {}

    def run(self) -> None:
        self._check_prerequisites()
        mirror = debian_mirror(self.recipe.suite)
        self._say(f"building {self.recipe.tag} from {mirror} (log: {self.log})")
        started = time.monotonic()
        workdir = Path(tempfile.mkdtemp(prefix="build-", dir=self.cache))
        rootfs = workdir / "rootfs"
        try:
            self._debootstrap(rootfs, mirror)
            self._phase("configure", lambda: configure_rootfs(rootfs, self.recipe))
            self._phase("import", lambda: self._import(rootfs))
        finally:
            shutil.rmtree(workdir, ignore_errors=True)
        size = self.client.images.get(self.recipe.tag).attrs.get("Size", 0)
        self._say(
            f"built {self.recipe.tag}: {size / 1e6:.0f} MB in {time.monotonic() - started:.0f} s"
        )

    def _check_prerequisites(self) -> None:
        if shutil.which("debootstrap") is None:
            raise ImagePrerequisiteError(
                "debootstrap is not installed; run `make setup` or `apt-get install debootstrap`"
            )
        if shutil.which("tar") is None:
            raise ImagePrerequisiteError("tar is not installed; run `apt-get install tar`")
        if os.geteuid() != 0:
            raise ImagePrerequisiteError(
                f"building the base image {self.recipe.tag} runs debootstrap, which needs root; "
                "run this once as root (sudo), after which the image is reused"
            )

    def _say(self, text: str) -> None:
        if self.progress is not None:
            self.progress(f"image: {redact(text)}")

    def _phase(self, name: str, action: Callable[[], None]) -> None:
        started = time.monotonic()
        self._say(name)
        action()
        self.seconds[name] = time.monotonic() - started
        self._say(f"{name} done in {self.seconds[name]:.1f} s")

    def _debootstrap(self, rootfs: Path, mirror: str) -> None:
        started = time.monotonic()
        args = self.recipe.debootstrap_args(rootfs, mirror)
        with self.log.open("w") as log:
            log.write(redact("$ " + " ".join(args)) + "\n")
            log.flush()
            process = subprocess.Popen(
                args, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL
            )
            assert process.stdout is not None
            # debootstrap names the mirror in its errors: its output is copied, redacted.
            copier = threading.Thread(
                target=_copy_redacted,
                args=(process.stdout, log),
                name="debootstrap-log",
                daemon=True,
            )
            copier.start()
            try:
                self._watch(process, started)
            except BaseException:
                process.kill()
                process.wait()
                raise
            finally:
                copier.join(timeout=30)
                if not copier.is_alive():
                    process.stdout.close()
        if process.returncode != 0:
            raise ImageBuildError(
                f"debootstrap exited with {process.returncode}; last lines of {self.log}:\n"
                f"{_tail(self.log, 20)}"
            )
        self.seconds["debootstrap"] = time.monotonic() - started
        self._say(f"debootstrap done in {self.seconds['debootstrap']:.1f} s")

    def _watch(self, process: subprocess.Popen[bytes], started: float) -> None:
        while process.poll() is None:
            if self.progress is not None:
                last = _tail(self.log, 1).strip()[:60]
                self._say(f"debootstrap {time.monotonic() - started:3.0f} s  {last}")
            time.sleep(0.5)

    def _import(self, rootfs: Path) -> None:
        tar = subprocess.Popen(
            ["tar", "--numeric-owner", "-C", str(rootfs), "--exclude=./dev/*", "-c", "."],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        assert tar.stdout is not None
        repository, tag = self.recipe.tag.split(":")
        try:
            self.client.api.import_image_from_stream(
                _chunks(tar.stdout),
                repository=repository,
                tag=tag,
                changes=_image_changes(self.recipe),
            )
        except docker.errors.APIError as err:
            tar.kill()
            raise ImageBuildError(f"docker import of {self.recipe.tag} failed: {err}") from err
        finally:
            tar.stdout.close()
            stderr = tar.stderr.read().decode(errors="replace") if tar.stderr else ""
            tar.wait()
        if tar.returncode != 0:
            raise ImageBuildError(f"tar of the root filesystem failed ({tar.returncode}): {stderr}")
        if not image_exists(self.client, self.recipe.tag):
            raise ImageBuildError(f"docker import finished but {self.recipe.tag} is missing")


def configure_rootfs(rootfs: Path, recipe: ImageRecipe) -> None:
    """sshd set-up, the entry script, and pruning of docs, caches and baked-in host keys."""
    entry = rootfs / ENTRY_PATH.lstrip("/")
    entry.parent.mkdir(parents=True, exist_ok=True)
    entry.write_text(recipe.entry_script)
    entry.chmod(0o755)
    (rootfs / "etc/ssh/sshd_config.d").mkdir(parents=True, exist_ok=True)
    (rootfs / "etc/ssh/sshd_config.d/squall.conf").write_text(recipe.sshd_config)
    ssh_dir = rootfs / "root/.ssh"
    ssh_dir.mkdir(parents=True, exist_ok=True)
    ssh_dir.chmod(0o700)
    for pattern in recipe.prune:
        for path in rootfs.glob(pattern):
            if path.is_dir() and not path.is_symlink():
                shutil.rmtree(path)
            else:
                path.unlink()
    for keep in ("var/cache/apt/archives/partial", "var/lib/apt/lists/partial", "var/log"):
        (rootfs / keep).mkdir(parents=True, exist_ok=True)


def _copy_redacted(stream: IO[bytes], log: IO[str]) -> None:
    for line in stream:
        log.write(redact(line.decode(errors="replace")))
        log.flush()


def _chunks(stream: IO[bytes], size: int = 1 << 20) -> Iterator[bytes]:
    while chunk := stream.read(size):
        yield chunk


def _tail(path: Path, lines: int) -> str:
    try:
        with path.open("rb") as handle:
            handle.seek(0, os.SEEK_END)
            handle.seek(max(0, handle.tell() - 8192))
            text = handle.read().decode(errors="replace")
            return redact("\n".join(text.splitlines()[-lines:]))
    except OSError:
        return ""
