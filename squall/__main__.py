"""``python -m squall``: the squall command line."""

from squall.script import run

raise SystemExit(run())
