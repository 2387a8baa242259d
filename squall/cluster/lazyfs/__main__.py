"""``python3 -m lazyfs mount|ctl|unmount ...``: the node-side commands.

    mount BACKING MOUNTPOINT --control SOCKET   serve the filesystem (foreground)
    ctl SOCKET status|drop                      ask the daemon; one JSON line on stdout
    unmount MOUNTPOINT                          unmount it (the daemon exits)

Exit codes: 0 done, 2 bad usage, 3 the filesystem or its daemon failed.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import resource
import sys

FAILED = 3


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python3 -m lazyfs", description=__doc__.split("\n")[0])
    commands = parser.add_subparsers(dest="command", required=True)
    mount = commands.add_parser("mount", help="serve the filesystem in the foreground")
    mount.add_argument("backing", help="the directory whose files it passes through")
    mount.add_argument("mountpoint", help="where to mount it (made if missing)")
    mount.add_argument("--control", required=True, help="path of the control socket")
    mount.add_argument(
        "--threads",
        action="store_true",
        help="serve requests on several threads (slower under the GIL: about 150 us a request "
        "against 35 us on one thread, measured here)",
    )
    ctl = commands.add_parser("ctl", help="ask a mounted filesystem's daemon")
    ctl.add_argument("control", help="path of the control socket")
    ctl.add_argument("op", choices=("status", "drop"))
    unmount = commands.add_parser("unmount", help="unmount (the daemon exits)")
    unmount.add_argument("mountpoint")
    unmount.add_argument("--timeout", type=float, default=30.0)
    args = parser.parse_args(argv)
    try:
        if args.command == "mount":
            return _mount(args.backing, args.mountpoint, args.control, args.threads)
        if args.command == "ctl":
            from .control import request

            print(json.dumps(request(args.control, args.op)), flush=True)
            return 0
        from .mounts import unmount as unmount_mountpoint

        done = unmount_mountpoint(args.mountpoint, timeout=args.timeout)
        print(json.dumps({"unmounted": done, "mountpoint": args.mountpoint}), flush=True)
        return 0
    except (OSError, RuntimeError) as err:
        print(f"lazyfs: {err}", file=sys.stderr, flush=True)
        return FAILED


def _mount(backing: str, mountpoint: str, control: str, threads: bool) -> int:
    logging.basicConfig(
        level=logging.WARNING, format="%(asctime)s %(levelname)s %(name)s: %(message)s"
    )
    from .control import ControlServer
    from .filesystem import LazyFilesystem, mount
    from .mounts import is_mounted

    if is_mounted(mountpoint):
        raise RuntimeError(
            f"{mountpoint} is a lazyfs mount already; `python3 -m lazyfs unmount {mountpoint}`"
        )
    os.makedirs(mountpoint, exist_ok=True)
    _run_ahead_of_the_disks_users()
    _soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))  # an open fd per changed directory
    filesystem = LazyFilesystem(backing)
    server = ControlServer(filesystem, control, os.path.realpath(mountpoint))
    filesystem.on_mounted = server.start
    logging.getLogger("lazyfs").warning("mounting %s on %s", filesystem.backing, mountpoint)
    try:
        mount(filesystem, mountpoint, threads=threads)
    finally:
        server.close()
    logging.getLogger("lazyfs").warning("unmounted %s", mountpoint)
    return 0


PRIORITY = -10
"""The daemon's nice value: every write of the broker waits for it, and on a busy machine a
woken daemon that waits for its turn on a CPU stalls the broker with it; it uses little CPU."""


def _run_ahead_of_the_disks_users() -> None:
    try:
        os.setpriority(os.PRIO_PROCESS, 0, PRIORITY)
    except PermissionError:
        logging.getLogger("lazyfs").warning(
            "cannot raise the daemon's priority (nice %d) without CAP_SYS_NICE; the broker's "
            "writes may wait longer for it on a busy machine",
            PRIORITY,
        )


if __name__ == "__main__":
    sys.exit(main())
