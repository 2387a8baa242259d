"""``python -m system_under_test broker --config FILE --set key=value ... [--standalone]``.

Needs nothing but this package (and kazoo in ZooKeeper mode): nodes receive only it.
"""

from __future__ import annotations

import sys

USAGE = """usage: python -m system_under_test COMMAND [options]

commands:
  broker    run one broker (python -m system_under_test broker --help)
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
    print(f"error: unknown command {command!r}\n{USAGE}", end="", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main())
