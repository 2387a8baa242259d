"""``python -m system_under_test broker --config FILE --set key=value ... [--standalone]``,
``python -m system_under_test dump-log --log-dir DIR [--topic T] [--partition N]``.

Needs nothing but this package (and kazoo in ZooKeeper mode): nodes receive only it.
"""

from __future__ import annotations

import sys

USAGE = """usage: python -m system_under_test COMMAND [options]

commands:
  broker    run one broker (python -m system_under_test broker --help)
  dump-log  print a log dir's partitions as they lie on disk (dump-log --help)
"""


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if not args or args[0] in ("-h", "--help"):
        print(USAGE, end="")
        return 0 if args else 2
    command, rest = args[0], args[1:]
    if command == "broker":
        from system_under_test.server import main as broker_main

        return broker_main(rest)
    if command == "dump-log":
        from system_under_test.log.dump import main as dump_main

        return dump_main(rest)
    print(f"error: unknown command {command!r}\n{USAGE}", end="", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main())
