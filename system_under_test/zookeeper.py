"""Cluster metadata in ZooKeeper, in Kafka's znode layout, through kazoo.

::

    /brokers/ids/<id>                              ephemeral, the broker's endpoint
    /controller                                    ephemeral, {"brokerid": id}
    /controller_epoch                              the controller epoch, bumped on election
    /brokers/topics/<topic>                        {"partitions": {"0": [1, 2, 3]}}
    /brokers/topics/<t>/partitions/<p>/state       leader, leader_epoch, controller_epoch, isr, elr
    /config/topics/<topic>                         topic-level configuration overrides
    /admin/preferred_replica_election              a request for preferred-leader election
    /isr_change_notification/isr_change_<seq>      leaders tell the controller of ISR changes
    /consumers/<group>/offsets/<topic>/<partition> committed consumer offsets
    /latest_producer_id_block                      the last block of producer ids a broker claimed

Every controller write is fenced: it runs in a transaction that checks the znode version of
``/controller_epoch`` the controller saw when it was elected, so a deposed controller's write
fails instead of landing.
"""

from __future__ import annotations

import contextlib
import json
import logging
import time
import warnings
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from kazoo.client import KazooClient, KazooState
from kazoo.exceptions import BadVersionError, NodeExistsError, NoNodeError
from kazoo.protocol.states import ZnodeStat
from kazoo.retry import KazooRetry

from system_under_test.metadata_cache import BrokerEndpoint

log = logging.getLogger(__name__)

BROKER_IDS = "/brokers/ids"
TOPICS = "/brokers/topics"
CONTROLLER = "/controller"
CONTROLLER_EPOCH = "/controller_epoch"
TOPIC_CONFIGS = "/config/topics"
PREFERRED_ELECTION = "/admin/preferred_replica_election"
ISR_CHANGES = "/isr_change_notification"
CONSUMERS = "/consumers"
PRODUCER_ID_BLOCK = "/latest_producer_id_block"
NO_LEADER = -1
KAFKA_LISTENER = "KAFKA"
"""The listener name under which a broker registers its Kafka-protocol endpoint."""


class MetadataError(RuntimeError):
    """ZooKeeper holds something this code cannot use, or refused a write."""


class ControllerMovedError(MetadataError):
    """A fenced controller write failed: another controller was elected since."""


class StalePartitionStateError(MetadataError):
    """A controller write found a partition state changed since it read it (a leader's ISR
    write whose notification it has not handled yet); nothing was written. ZooKeeper names
    only the first operation of a multi that failed, so any of ``keys`` (every state the
    write held) may be stale as well: read them all again."""

    def __init__(self, stale: tuple[str, int], keys: list[tuple[str, int]]) -> None:
        super().__init__(f"the state of {stale[0]}-{stale[1]} changed since the controller read it")
        self.stale = stale
        self.keys = keys


class BrokerIdInUseError(MetadataError):
    """Another live broker registered the same broker.id."""


@dataclass(frozen=True)
class LeaderAndIsr:
    """The state znode of one partition; ``elr``: its eligible leader replicas (KIP-966),
    replicas out of the ISR that hold everything below the high watermark."""

    leader: int
    leader_epoch: int
    isr: tuple[int, ...]
    controller_epoch: int
    elr: tuple[int, ...] = ()

    def to_json(self) -> bytes:
        return json.dumps(
            {
                "version": 1,
                "leader": self.leader,
                "leader_epoch": self.leader_epoch,
                "controller_epoch": self.controller_epoch,
                "isr": list(self.isr),
                "elr": list(self.elr),
            }
        ).encode()

    @classmethod
    def from_json(cls, data: bytes, path: str) -> LeaderAndIsr:
        doc = _load(data, path)
        try:
            return cls(
                int(doc["leader"]),
                int(doc["leader_epoch"]),
                tuple(int(b) for b in doc["isr"]),
                int(doc["controller_epoch"]),
                tuple(int(b) for b in doc.get("elr", ())),
            )
        except (KeyError, TypeError, ValueError) as err:
            raise MetadataError(f"{path}: not a partition state ({err})") from None


def _load(data: bytes, path: str) -> Any:
    try:
        return json.loads(data.decode())
    except (UnicodeDecodeError, json.JSONDecodeError) as err:
        raise MetadataError(f"{path}: not valid JSON ({err})") from None


def partition_state_path(topic: str, partition: int) -> str:
    return f"{TOPICS}/{topic}/partitions/{partition}/state"


def consumer_offset_path(group: str, topic: str, partition: int) -> str:
    return f"{CONSUMERS}/{group}/offsets/{topic}/{partition}"


class ClusterMetadataStore:
    """A small facade over kazoo for everything the brokers and the controller keep in ZooKeeper.

    ``on_session_lost`` runs (on kazoo's thread) when the session expires: whoever acted as
    leader or controller must stop at once.
    """

    def __init__(
        self,
        connect: str,
        *,
        session_timeout_ms: int = 18000,
        connection_timeout_ms: int = 18000,
        on_session_lost: Callable[[], None] | None = None,
        on_reconnected: Callable[[], None] | None = None,
    ) -> None:
        self.connect = connect
        self.session_timeout_ms = session_timeout_ms
        self.connection_timeout_ms = connection_timeout_ms
        retry = KazooRetry(max_tries=3, delay=0.1, backoff=2, max_delay=1.0, ignore_expire=False)
        self.client = KazooClient(
            hosts=connect,
            timeout=session_timeout_ms / 1000.0,
            connection_retry=KazooRetry(max_tries=-1, delay=0.1, max_delay=1.0),
            command_retry=retry,
        )
        self._on_session_lost = on_session_lost
        self._on_reconnected = on_reconnected
        self._was_lost = False
        self._suspended = False
        self._closing = False
        self.client.add_listener(self._state_changed)

    def _state_changed(self, state: str) -> None:
        if self._closing:
            return
        if state == KazooState.LOST:
            log.warning("ZooKeeper session lost (%s)", self.connect)
            self._was_lost = True
            if self._on_session_lost is not None:
                self._on_session_lost()
        elif state == KazooState.SUSPENDED:
            log.warning("ZooKeeper connection suspended (%s)", self.connect)
            self._suspended = True
        elif state == KazooState.CONNECTED and self._was_lost:
            self._was_lost = self._suspended = False
            if self._on_reconnected is not None:
                self._on_reconnected()
        elif state == KazooState.CONNECTED and self._suspended:
            self._suspended = False
            log.info("ZooKeeper connection restored, session kept (%s)", self.connect)

    def start(self, *, create_layout: bool = True) -> None:
        """Connect, or raise MetadataError naming the connect string.

        `create_layout` creates the chroot and Kafka's top-level znodes where missing, as a
        broker does; observers that only read pass False and write nothing.
        """
        try:
            with warnings.catch_warnings():
                # kazoo warns that a chroot is missing; _ensure_chroot creates it just below.
                warnings.simplefilter("ignore", UserWarning)
                self.client.start(timeout=self.connection_timeout_ms / 1000.0)
        except Exception as err:
            self.client.stop()
            raise MetadataError(
                f"cannot reach ZooKeeper at {self.connect} within "
                f"{self.connection_timeout_ms} ms ({err}); is it running? "
                "(zookeeper.connect, zookeeper.connection.timeout.ms)"
            ) from None
        if not create_layout:
            return
        self._ensure_chroot()
        for path in (BROKER_IDS, TOPICS, TOPIC_CONFIGS, ISR_CHANGES, CONSUMERS, "/admin"):
            self.client.ensure_path(path)

    def _ensure_chroot(self) -> None:
        """Create the chroot of ``host:port/chroot`` if missing, as Kafka does."""
        chroot = self.client.chroot
        if not chroot:
            return
        self.client.chroot = ""
        try:
            self.client.ensure_path(chroot)
        finally:
            self.client.chroot = chroot

    def close(self) -> None:
        self._closing = True
        self.client.stop()
        self.client.close()

    @property
    def connected(self) -> bool:
        return bool(self.client.connected)

    # brokers

    def register_broker(
        self,
        endpoint: BrokerEndpoint,
        *,
        incarnation: int | None = None,
        kafka_endpoint: tuple[str, int] | None = None,
    ) -> int:
        """Create the ephemeral /brokers/ids/<id>; its czxid, this run's broker epoch
        (KIP-380). A live duplicate id is an error. A process registering again after its
        session expired gives the czxid of its first registration (`incarnation`): it did
        not restart, and its logs are what they were (KIP-966's previous broker epoch).
        A broker with a Kafka-protocol listener lists it as a second endpoint, ``KAFKA://``,
        as Kafka lists a broker's several listeners."""
        doc: dict[str, Any] = {
            "version": 4,
            "host": endpoint.host,
            "port": endpoint.port,
            "endpoints": [f"PLAINTEXT://{endpoint.host}:{endpoint.port}"],
            "timestamp": str(int(time.time() * 1000)),
        }
        if kafka_endpoint is not None:
            doc["endpoints"].append(f"{KAFKA_LISTENER}://{kafka_endpoint[0]}:{kafka_endpoint[1]}")
            doc["listener_security_protocol_map"] = {
                "PLAINTEXT": "PLAINTEXT",
                KAFKA_LISTENER: "PLAINTEXT",
            }
        if incarnation is not None:
            doc["incarnation"] = incarnation
        body = json.dumps(doc).encode()
        path = f"{BROKER_IDS}/{endpoint.broker_id}"
        # A broker restarted after a crash may find its previous session's znode until that
        # session expires: wait for it, as long as one session timeout and a margin.
        deadline = time.monotonic() + self.session_timeout_ms / 1000.0 * 1.5 + 2.0
        while True:
            try:
                _path, created = self.client.create(path, body, ephemeral=True, include_data=True)
                return int(created.czxid)
            except NodeExistsError:
                try:
                    _data, stat = self.client.get(path)
                except NoNodeError:
                    continue
                if stat.ephemeralOwner == self.client.client_id[0]:
                    self.client.set(path, body)
                    return int(stat.czxid)
                if time.monotonic() > deadline:
                    raise BrokerIdInUseError(
                        f"broker.id {endpoint.broker_id} is registered by another live broker "
                        f"({path}); give every broker a unique broker.id"
                    ) from None
                time.sleep(0.2)

    def broker_ids(self, watch: Callable[[Any], None] | None = None) -> list[int]:
        return sorted(int(c) for c in self._children(BROKER_IDS, watch))

    def _children(self, path: str, watch: Callable[[Any], None] | None) -> list[str]:
        """The children of `path`; none while it does not exist (a ZooKeeper no broker
        has laid out yet), watching for its creation when `watch` is given."""
        try:
            return list(self.client.get_children(path, watch=watch))
        except NoNodeError:
            if watch is not None:
                self.client.exists(path, watch=watch)
            return []

    def broker(self, broker_id: int) -> BrokerEndpoint | None:
        path = f"{BROKER_IDS}/{broker_id}"
        try:
            data, _stat = self.client.get(path)
        except NoNodeError:
            return None
        doc = _load(data, path)
        return BrokerEndpoint(broker_id, str(doc["host"]), int(doc["port"]))

    def _registrations(
        self, watch: Callable[[Any], None] | None = None
    ) -> Iterator[tuple[BrokerEndpoint, dict[str, Any], ZnodeStat]]:
        """Each registered broker's endpoint, registration document and znode stat (a
        broker whose znode went between the listing and the read is passed over)."""
        for broker_id in self.broker_ids(watch=watch):
            path = f"{BROKER_IDS}/{broker_id}"
            try:
                data, stat = self.client.get(path)
            except NoNodeError:
                continue
            doc = _load(data, path)
            yield BrokerEndpoint(broker_id, str(doc["host"]), int(doc["port"])), doc, stat

    def broker_registrations(
        self, watch: Callable[[Any], None] | None = None
    ) -> dict[int, tuple[BrokerEndpoint, int, int]]:
        """Live brokers with their registration's czxid, which changes when a broker
        re-registers (Kafka's broker epoch, KIP-380): a bounce the controller must not miss;
        and the czxid of the first registration of the broker's process (its incarnation:
        the same when it only registered again after its session expired)."""
        out: dict[int, tuple[BrokerEndpoint, int, int]] = {}
        for endpoint, doc, stat in self._registrations(watch):
            incarnation = doc.get("incarnation")
            out[endpoint.broker_id] = (
                endpoint,
                int(stat.czxid),
                int(incarnation) if isinstance(incarnation, int) else int(stat.czxid),
            )
        return out

    def kafka_endpoints(self) -> dict[int, tuple[BrokerEndpoint, tuple[str, int] | None]]:
        """Each registered broker's endpoint and its Kafka listener's (None: it has none)."""
        out: dict[int, tuple[BrokerEndpoint, tuple[str, int] | None]] = {}
        for endpoint, doc, _stat in self._registrations():
            kafka: tuple[str, int] | None = None
            for item in doc.get("endpoints") or []:
                name, sep, address = str(item).partition("://")
                host, colon, port = address.rpartition(":")
                if sep and colon and name == KAFKA_LISTENER and port.isdigit():
                    kafka = (host.strip("[]"), int(port))
            out[endpoint.broker_id] = (endpoint, kafka)
        return out

    def live_brokers(self) -> dict[int, BrokerEndpoint]:
        out: dict[int, BrokerEndpoint] = {}
        for broker_id in self.broker_ids():
            endpoint = self.broker(broker_id)
            if endpoint is not None:
                out[broker_id] = endpoint
        return out

    # controller

    def controller_id(self, watch: Callable[[Any], None] | None = None) -> int | None:
        try:
            data, _stat = self.client.get(CONTROLLER, watch=watch)
        except NoNodeError:
            if watch is not None:
                self.client.exists(CONTROLLER, watch=watch)
            return None
        return int(_load(data, CONTROLLER)["brokerid"])

    def try_become_controller(self, broker_id: int) -> tuple[int, int] | None:
        """Create /controller and bump /controller_epoch in one transaction.

        Returns (controller epoch, znode version of /controller_epoch) on success, None when
        another broker is controller.
        """
        try:
            data, stat = self.client.get(CONTROLLER_EPOCH)
            epoch, version = int(data.decode() or "0"), stat.version
        except NoNodeError:
            with contextlib.suppress(NodeExistsError):
                self.client.create(CONTROLLER_EPOCH, b"0")
            return self.try_become_controller(broker_id)
        body = json.dumps(
            {"version": 1, "brokerid": broker_id, "timestamp": str(int(time.time() * 1000))}
        ).encode()
        transaction = self.client.transaction()
        transaction.create(CONTROLLER, body, ephemeral=True)
        transaction.set_data(CONTROLLER_EPOCH, str(epoch + 1).encode(), version=version)
        results = transaction.commit()
        if any(isinstance(r, Exception) for r in results):
            return None
        return epoch + 1, version + 1

    def resign_controller(self, broker_id: int) -> None:
        """Delete /controller if it is ours."""
        if self.controller_id() == broker_id:
            with contextlib.suppress(NoNodeError):
                self.client.delete(CONTROLLER)

    # producer ids

    def claim_producer_id_block(self, broker_id: int, size: int) -> tuple[int, int]:
        """Claim the next ``size`` producer ids (first and last) for this broker: a write of
        ``/latest_producer_id_block`` conditional on the version read, tried again when another
        broker claimed a block in between (Kafka's ZooKeeper-era layout)."""
        while True:
            try:
                data, stat = self.client.get(PRODUCER_ID_BLOCK)
            except NoNodeError:
                first, version = 0, None
            else:
                first, version = int(_load(data, PRODUCER_ID_BLOCK)["block_end"]) + 1, stat.version
            last = first + size - 1
            doc = json.dumps(
                {
                    "version": 1,
                    "broker": broker_id,
                    "block_start": str(first),
                    "block_end": str(last),
                }
            ).encode()
            try:
                if version is None:
                    self.client.create(PRODUCER_ID_BLOCK, doc)
                else:
                    self.client.set(PRODUCER_ID_BLOCK, doc, version=version)
            except (NodeExistsError, BadVersionError):
                continue
            return first, last

    # topics

    def topics(self, watch: Callable[[Any], None] | None = None) -> list[str]:
        return sorted(self._children(TOPICS, watch))

    def create_topic(
        self, topic: str, assignment: Mapping[int, Sequence[int]], config: Mapping[str, object]
    ) -> None:
        """Write the assignment and the config; NodeExistsError if the topic exists."""
        transaction = self.client.transaction()
        transaction.create(
            f"{TOPIC_CONFIGS}/{topic}",
            json.dumps({"version": 1, "config": {k: str(v) for k, v in config.items()}}).encode(),
        )
        transaction.create(
            f"{TOPICS}/{topic}",
            json.dumps(
                {"version": 1, "partitions": {str(p): list(r) for p, r in assignment.items()}}
            ).encode(),
        )
        results = transaction.commit()
        for result in results:
            if isinstance(result, NodeExistsError):
                raise result
            if isinstance(result, Exception):
                raise MetadataError(f"creating topic {topic} failed: {result!r}")

    def topic_assignment(self, topic: str) -> dict[int, list[int]] | None:
        path = f"{TOPICS}/{topic}"
        try:
            data, _stat = self.client.get(path)
        except NoNodeError:
            return None
        doc = _load(data, path)
        return {int(p): [int(b) for b in r] for p, r in doc["partitions"].items()}

    def topic_config(self, topic: str) -> dict[str, str]:
        path = f"{TOPIC_CONFIGS}/{topic}"
        try:
            data, _stat = self.client.get(path)
        except NoNodeError:
            return {}
        return {str(k): str(v) for k, v in _load(data, path).get("config", {}).items()}

    # partition state

    def partition_state(self, topic: str, partition: int) -> tuple[LeaderAndIsr, int] | None:
        """The state and its znode version, or None if not yet created."""
        found = self.partition_state_written(topic, partition)
        return None if found is None else (found[0], found[1])

    def partition_state_written(
        self, topic: str, partition: int
    ) -> tuple[LeaderAndIsr, int, int] | None:
        """The state, its znode version and the zxid of its last write (mzxid), comparable
        with a broker registration's czxid: which brokers registered after it was written."""
        path = partition_state_path(topic, partition)
        try:
            data, stat = self.client.get(path)
        except NoNodeError:
            return None
        return LeaderAndIsr.from_json(data, path), int(stat.version), int(stat.mzxid)

    def write_partition_states(
        self,
        states: Mapping[tuple[str, int], tuple[LeaderAndIsr, int | None]],
        *,
        controller_epoch_version: int,
    ) -> dict[tuple[str, int], int]:
        """Controller write of many states, fenced by the /controller_epoch znode version.

        Each value is (state, expected znode version, or None to create). Returns the new
        versions. Raises ControllerMovedError if the controller epoch moved on, and
        StalePartitionStateError (nothing written) if some state's version did.
        """
        if not states:
            return {}
        transaction = self.client.transaction()
        transaction.check(CONTROLLER_EPOCH, controller_epoch_version)
        for (topic, partition), (state, version) in states.items():
            path = partition_state_path(topic, partition)
            if version is None:
                self.client.ensure_path(f"{TOPICS}/{topic}/partitions/{partition}")
                transaction.create(path, state.to_json())
            else:
                transaction.set_data(path, state.to_json(), version=version)
        results = transaction.commit()
        if isinstance(results[0], BadVersionError):
            raise ControllerMovedError("the controller epoch moved on: this controller was deposed")
        stale = [
            key
            for key, result in zip(states, results[1:], strict=True)
            if isinstance(result, BadVersionError)
        ]
        if stale:
            raise StalePartitionStateError(stale[0], list(states))
        out: dict[tuple[str, int], int] = {}
        for (key, (_state, version)), result in zip(states.items(), results[1:], strict=True):
            if isinstance(result, Exception):
                raise MetadataError(
                    f"writing the state of {key[0]}-{key[1]} failed: {type(result).__name__}"
                )
            out[key] = 0 if version is None else version + 1
        return out

    def update_isr(
        self, topic: str, partition: int, state: LeaderAndIsr, expected_version: int
    ) -> int | None:
        """A leader's conditional ISR write; the new version, or None if the znode moved on."""
        try:
            stat = self.client.set(
                partition_state_path(topic, partition), state.to_json(), version=expected_version
            )
        except (BadVersionError, NoNodeError):
            return None
        self.client.create(
            f"{ISR_CHANGES}/isr_change_",
            json.dumps(
                {"version": 1, "partitions": [{"topic": topic, "partition": partition}]}
            ).encode(),
            sequence=True,
        )
        return int(stat.version)

    def take_isr_change_notifications(
        self, watch: Callable[[Any], None] | None = None
    ) -> list[tuple[str, int]]:
        """The partitions named by pending ISR-change notifications, which are deleted."""
        changed: list[tuple[str, int]] = []
        for child in sorted(self.client.get_children(ISR_CHANGES, watch=watch)):
            path = f"{ISR_CHANGES}/{child}"
            try:
                data, _stat = self.client.get(path)
                self.client.delete(path)
            except NoNodeError:
                continue
            for entry in _load(data, path).get("partitions", []):
                changed.append((str(entry["topic"]), int(entry["partition"])))
        return changed

    # preferred leader election

    def request_preferred_election(self, partitions: Sequence[tuple[str, int]]) -> None:
        body = json.dumps(
            {"version": 1, "partitions": [{"topic": t, "partition": p} for t, p in partitions]}
        ).encode()
        try:
            self.client.create(PREFERRED_ELECTION, body)
        except NodeExistsError:
            raise MetadataError(
                "a preferred leader election is already in progress; retry when it finishes"
            ) from None

    def take_preferred_election(
        self, watch: Callable[[Any], None] | None = None
    ) -> list[tuple[str, int]] | None:
        try:
            data, _stat = self.client.get(PREFERRED_ELECTION, watch=watch)
        except NoNodeError:
            if watch is not None:
                self.client.exists(PREFERRED_ELECTION, watch=watch)
            return None
        self.client.delete(PREFERRED_ELECTION)
        doc = _load(data, PREFERRED_ELECTION)
        return [(str(e["topic"]), int(e["partition"])) for e in doc.get("partitions", [])]

    # consumer groups

    def commit_offset(self, group: str, topic: str, partition: int, offset: int) -> None:
        path = consumer_offset_path(group, topic, partition)
        body = str(offset).encode()
        try:
            self.client.set(path, body)
        except NoNodeError:
            self.client.create(path, body, makepath=True)

    def group_offsets(self, group: str) -> dict[tuple[str, int], int]:
        """Every committed offset of `group`, by (topic, partition)."""
        found: dict[tuple[str, int], int] = {}
        root = f"{CONSUMERS}/{group}/offsets"
        try:
            topics = self.client.get_children(root)
        except NoNodeError:
            return found
        for topic in topics:
            try:
                partitions = self.client.get_children(f"{root}/{topic}")
            except NoNodeError:
                continue
            for name in partitions:
                if name.isdigit():
                    offset = self.committed_offset(group, topic, int(name))
                    if offset is not None:
                        found[(topic, int(name))] = offset
        return found

    def committed_offset(self, group: str, topic: str, partition: int) -> int | None:
        path = consumer_offset_path(group, topic, partition)
        try:
            data, _stat = self.client.get(path)
        except NoNodeError:
            return None
        try:
            return int(data.decode())
        except (UnicodeDecodeError, ValueError):
            raise MetadataError(f"{path}: committed offset {data!r} is not a number") from None
