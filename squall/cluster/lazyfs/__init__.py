"""lazyfs: a FUSE filesystem that can lose what was not fsynced, as Jepsen's lazyfs does.

It runs on the nodes (shipped like the system under test: the standard library and mfusepy,
which needs libfuse3 and fusermount3 from Debian's ``fuse3``), under the brokers' data
directories. On command it drops every write, truncate and directory change not made
durable by an fsync, as a power loss would (``filesystem``); squall commands it over SSH
through ``python3 -m lazyfs`` (``__main__``, ``control``). It lives in ``squall/cluster/`` but
is uploaded alone, as the top-level package ``lazyfs``: it imports nothing of squall, and its
modules import each other relatively.
"""
