"""Producer ids claimed in blocks through a real ZooKeeper: unique across brokers that claim at
once, and across a broker's restart."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator

import pytest

from system_under_test.producer_ids import ProducerIdManager
from system_under_test.zookeeper import PRODUCER_ID_BLOCK, ClusterMetadataStore

pytestmark = pytest.mark.integration


@pytest.fixture
def stores(zookeeper: str) -> Iterator[list[ClusterMetadataStore]]:
    opened = [ClusterMetadataStore(zookeeper, connection_timeout_ms=5000) for _ in range(3)]
    for store in opened:
        store.start()
    yield opened
    for store in opened:
        store.close()


def test_brokers_claiming_at_once_hand_out_disjoint_ids(stores: list[ClusterMetadataStore]) -> None:
    managers = [
        ProducerIdManager(lambda size, s=s, b=b: s.claim_producer_id_block(b, size), block_size=7)
        for b, s in enumerate(stores, start=1)
    ]
    handed: list[list[int]] = [[] for _ in managers]
    start = threading.Barrier(len(managers))

    def take(i: int) -> None:
        start.wait()
        handed[i].extend(managers[i].next_id() for _ in range(50))

    threads = [threading.Thread(target=take, args=(i,)) for i in range(len(managers))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    every = [pid for ids in handed for pid in ids]
    assert len(every) == 150 and len(set(every)) == 150
    data, _ = stores[0].client.get(PRODUCER_ID_BLOCK)
    last = json.loads(data)
    assert last["version"] == 1 and int(last["block_end"]) == max(every) // 7 * 7 + 6


def test_a_restarted_broker_claims_a_new_block(stores: list[ClusterMetadataStore]) -> None:
    store = stores[0]
    before = ProducerIdManager(lambda size: store.claim_producer_id_block(1, size))
    assert [before.next_id() for _ in range(3)] == [0, 1, 2]
    after = ProducerIdManager(lambda size: store.claim_producer_id_block(1, size))
    assert after.next_id() == 1000
