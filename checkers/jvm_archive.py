"""Class-data sharing for a local Spark JVM: Spark's classes, loaded and verified once, kept
in an archive that later JVMs map instead of loading them again (a local session starts in
about half the time).

The first local session records the archive as its JVM exits (`-XX:ArchiveClassesAtExit`,
into a `.part` file, claimed by a `.claim` file that names the JVM); a later session that
finds that JVM gone moves the archive into place and starts with it (`-XX:SharedArchiveFile`).
An archive is kept per Java runtime and Spark installation (its name hashes them), in the
user's private cache directory; a JVM ignores an archive it cannot use (`-Xshare:auto`) and
checks its checksum before using it. The JVM's own logging is turned off, so nothing it says
of archives reaches the terminal.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import shutil
import time
from pathlib import Path

from checkers.processes import process_runs

_QUIET = "-Xlog:disable -Xlog:all=error:stderr"


def _java() -> Path | None:
    """The java binary Spark's launcher runs: JAVA_HOME's, else the first on PATH."""
    home = os.environ.get("JAVA_HOME")
    found = Path(home) / "bin" / "java" if home else None
    if found is None or not found.exists():
        which = shutil.which("java")
        found = Path(which) if which else None
    return found.resolve() if found is not None else None


def archive_key() -> str | None:
    """What an archive depends on, hashed: the Java runtime and Spark's jars (None: no java)."""
    java = _java()
    if java is None:
        return None
    import pyspark

    jars = Path(pyspark.__file__).parent / "jars"
    listing = sorted(p.name for p in jars.glob("*.jar")) if jars.is_dir() else []
    stamp = f"{java}:{java.stat().st_mtime_ns}:{pyspark.__version__}:{','.join(listing)}"
    return hashlib.sha256(stamp.encode()).hexdigest()[:16]


def archive_options(directory: Path) -> tuple[str, Path | None]:
    """The JVM options for the archive in `directory`, and the claim file to record the
    JVM's pid in (`record_jvm`) when this JVM is the one that records the archive."""
    key = archive_key()
    if key is None:
        return "", None
    archive, part, claim = (directory / f"{key}{suffix}" for suffix in (".jsa", ".part", ".claim"))
    _settle(archive, part, claim)
    if archive.exists():
        return f"-XX:SharedArchiveFile={archive} -XX:+VerifySharedSpaces {_QUIET}", None
    try:
        fd = os.open(claim, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o600)
    except FileExistsError:  # another JVM is recording it
        return _QUIET, None
    os.close(fd)
    return f"-XX:ArchiveClassesAtExit={part} {_QUIET}", claim


def record_jvm(claim: Path, pid: int) -> None:
    """Name the JVM recording the archive in its claim."""
    with contextlib.suppress(OSError):
        claim.write_text(str(pid))


def _settle(archive: Path, part: Path, claim: Path, stale_s: float = 600.0) -> None:
    """Move a recorded archive into place once the JVM that recorded it is gone (a claim
    that names no JVM counts as gone when it is `stale_s` old)."""
    try:
        pid = int(claim.read_text() or "0")
        age = time.time() - claim.stat().st_mtime
    except (OSError, ValueError):
        return
    if (pid and process_runs(pid)) or (not pid and age < stale_s):
        return
    with contextlib.suppress(OSError):
        if part.exists() and part.stat().st_size > 0:
            os.replace(part, archive)
        else:
            part.unlink(missing_ok=True)
        claim.unlink(missing_ok=True)
