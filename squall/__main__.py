"""``python -m squall``: the squall command line."""

from squall.cli import main

raise SystemExit(main())
