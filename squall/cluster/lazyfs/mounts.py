"""Which lazyfs mounts exist on this machine, and unmounting them."""

from __future__ import annotations

import os
import subprocess
import time

FS_TYPE = "fuse.lazyfs"


def _unescape(field: str) -> str:
    """/proc/self/mounts writes space, tab, newline and backslash as octal escapes."""
    for code, char in (("\\040", " "), ("\\011", "\t"), ("\\012", "\n"), ("\\134", "\\")):
        field = field.replace(code, char)
    return field


def lazyfs_mounts() -> list[str]:
    """The mountpoints of every lazyfs mount, live or with a dead daemon."""
    with open("/proc/self/mounts") as mounts:
        return [
            _unescape(fields[1])
            for fields in (line.split() for line in mounts)
            if len(fields) > 2 and fields[2] == FS_TYPE
        ]


def is_mounted(mountpoint: str) -> bool:
    return os.path.realpath(mountpoint) in lazyfs_mounts()


def unmount(mountpoint: str, *, timeout: float = 30.0) -> bool:
    """Unmount a lazyfs mount (its daemon then exits); False if it was not mounted.
    OSError when it stays busy (a process still uses it) for ``timeout`` seconds."""
    mountpoint = os.path.realpath(mountpoint)
    if mountpoint not in lazyfs_mounts():
        return False
    deadline = time.monotonic() + timeout
    while True:
        result = subprocess.run(
            ["fusermount3", "-u", "--", mountpoint], capture_output=True, text=True, check=False
        )
        if result.returncode == 0 or mountpoint not in lazyfs_mounts():
            return True
        if time.monotonic() > deadline:
            raise OSError(
                f"cannot unmount {mountpoint}: {result.stderr.strip()}; stop the processes "
                "using it (fuser -m), or `fusermount3 -u -z` to detach it lazily"
            )
        time.sleep(0.2)
