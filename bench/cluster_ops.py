"""Cluster runtime figures: image build, cluster bring-up, partition apply and heal.

    .venv/bin/python bench/cluster_ops.py [--nodes 5] [--rebuild-image]

Prints one JSON line per measurement. --rebuild-image builds the base image under a fresh
recipe version (so the cached one is not reused) and removes it afterwards.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import random
import secrets
import tempfile
import time

import docker

from nemesis import Fault, Nemesis, heal_all
from squall.cluster import image
from squall.cluster.docker import DockerRuntime


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--nodes", type=int, default=5)
    parser.add_argument("--rebuild-image", action="store_true")
    args = parser.parse_args()
    os.environ.setdefault("SQUALL_HOME", tempfile.mkdtemp(prefix="squall-bench-"))
    client = docker.from_env()
    if args.rebuild_image:
        recipe = dataclasses.replace(
            image.DEFAULT_RECIPE, version=1_000_000 + random.randrange(10**6)
        )
        started = time.monotonic()
        tag = image.ensure_image(client, recipe=recipe)
        seconds = time.monotonic() - started
        size = client.images.get(tag).attrs["Size"]
        print(
            json.dumps(
                {"measure": "image build", "seconds": round(seconds, 1), "mb": round(size / 1e6)}
            )
        )
        client.images.remove(tag, force=True)
    tag = image.ensure_image(client)
    print(
        json.dumps(
            {
                "measure": "image size",
                "tag": tag,
                "mb": round(client.images.get(tag).attrs["Size"] / 1e6),
            }
        )
    )
    runtime = DockerRuntime(client)
    run_id = f"bench-{secrets.token_hex(3)}"
    started = time.monotonic()
    cluster = runtime.up(run_id, args.nodes)
    print(
        json.dumps(
            {
                "measure": "cluster up (cached image)",
                "brokers": args.nodes,
                "seconds": round(time.monotonic() - started, 1),
            }
        )
    )
    try:
        nemesis = Nemesis(cluster, rng=random.Random(1))
        for shape in ("halves", "majorities-ring", "isolate"):
            fault = Fault(
                "start-partition",
                {"shape": shape, "targets": ["n1"]} if shape == "isolate" else {"shape": shape},
            )
            started = time.monotonic()
            nemesis.apply(fault)
            applied = time.monotonic() - started
            started = time.monotonic()
            nemesis.heal()
            healed = time.monotonic() - started
            print(
                json.dumps(
                    {
                        "measure": f"partition {shape}",
                        "nodes": args.nodes + 1,
                        "apply_s": round(applied, 2),
                        "heal_s": round(healed, 2),
                    }
                )
            )
        started = time.monotonic()
        heal_all(cluster)
        print(json.dumps({"measure": "heal_all", "seconds": round(time.monotonic() - started, 2)}))
    finally:
        cluster.close()
        runtime.clean(run_id)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
