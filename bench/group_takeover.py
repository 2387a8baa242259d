"""Consumer groups through real clients: a killed member's partitions taken over.

    .venv/bin/python bench/group_takeover.py [--rounds 3] [--clients a,b] [--out FILE]

Issue 33's first goal, per client (kafka-python, confluent-kafka, aiokafka) and round: a
3-broker cluster (ZooKeeper, a 6-partition topic with replication factor 3 and
min.insync.replicas 2), three members of one group, each in its own process
(`tests/integration/group_member.py`: subscribe, poll, commit after processing; session
timeout 6 s, heartbeats every 1 s). Measured:

- whether every partition was owned by exactly one member once the group settled;
- after one member is SIGKILLed, how long until the two others own every partition (from the
  kill to the later of their new assignments), beside the session timeout;
- whether every record acknowledged (acks=all) before and after the kill was read by some
  member, and whether the survivors resumed each of the killed member's partitions within
  its commits (at or after its last commit it saw taken, never past a record nobody read).

One JSON line per round on stdout, a table at the end, everything in --out.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))  # the group members and the cluster live with the tests

from squall.cluster.zookeeper_server import ZooKeeperServer  # noqa: E402
from tests.integration.group_member import SESSION_TIMEOUT_MS  # noqa: E402
from tests.integration.test_kafka_clients import KafkaCluster  # noqa: E402
from tests.integration.test_kafka_groups import (  # noqa: E402
    CLIENT_NAMES,
    PARTITIONS,
    Member,
    all_read,
    create,
    owned_once,
    produce,
    wait_until,
)

PER_PARTITION = 50


def one_round(client: str, zookeeper: ZooKeeperServer, root: Path) -> dict[str, Any]:
    cluster = KafkaCluster(root, zookeeper)
    cluster.start()
    members: list[Member] = []
    try:
        topic, group = "shared", f"group-{client}"
        create(cluster, topic)
        produce(cluster, topic, 0, PER_PARTITION * PARTITIONS)
        bootstrap = ",".join(cluster.kafka_bootstrap())
        started = time.monotonic()
        for i in range(3):
            members.append(Member(client, bootstrap, group, topic, root / f"member-{i}.log"))
        owners = wait_until(lambda: owned_once(members), "each partition owned once", 90)
        settled = max(m.assigned_at for m in members) - started
        wait_until(lambda: all_read(members, PER_PARTITION), "every record read", 90)
        victim = owners[0]
        victims = list(victim.assigned)
        survivors = [m for m in members if m is not victim]
        victim.kill()
        killed_at = time.monotonic()
        produce(cluster, topic, PER_PARTITION * PARTITIONS, PER_PARTITION * PARTITIONS)
        wait_until(lambda: owned_once(survivors), "the survivors to own every partition", 90)
        takeover = max(m.assigned_at for m in survivors) - killed_at
        wait_until(
            lambda: all_read([*survivors, victim], 2 * PER_PARTITION), "every record read", 90
        )
        resumed_within_commits = True
        for partition in victims:
            resumed = min(o for m in survivors for o in m.offsets_read(partition, after=killed_at))
            committed = victim.committed.get(partition, 0)
            last_read = max(victim.offsets_read(partition), default=-1)
            resumed_within_commits &= committed <= resumed <= last_read + 1
        return {
            "client": client,
            "owned_once": True,
            "first_assignment_s": round(settled, 2),
            "takeover_s": round(takeover, 2),
            "session_timeout_s": SESSION_TIMEOUT_MS / 1000,
            "all_acknowledged_read": True,
            "resumed_within_commits": resumed_within_commits,
        }
    except AssertionError as err:
        return {"client": client, "error": str(err)}
    finally:
        for member in members:
            member.stop()
        cluster.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--clients", default=",".join(CLIENT_NAMES))
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    rows = []
    with tempfile.TemporaryDirectory() as tmp, ZooKeeperServer(Path(tmp) / "zk") as zookeeper:
        for client in args.clients.split(","):
            for n in range(args.rounds):
                row = one_round(client, zookeeper, Path(tmp) / f"{client}-{n}")
                print(json.dumps(row), flush=True)
                rows.append(row)
    table = Table(title="A killed member's partitions taken over (session timeout 6 s)")
    for column in ("client", "owned once", "takeover s", "all read", "resumed within commits"):
        table.add_column(column)
    for row in rows:
        table.add_row(
            row["client"],
            str(row.get("owned_once", row.get("error"))),
            str(row.get("takeover_s", "-")),
            str(row.get("all_acknowledged_read", "-")),
            str(row.get("resumed_within_commits", "-")),
        )
    Console().print(table)
    if args.out is not None:
        args.out.write_text(json.dumps(rows, indent=2) + "\n")


if __name__ == "__main__":
    main()
