"""The client libraries a workload can run through, by name: squall's own, over the brokers'
listeners, and two Kafka clients over their second (Kafka) listeners (docs/clients.md);
all speak Kafka's protocol.

The Kafka clients' modules are imported only when chosen.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Literal, get_args

from workloads.client import ClientFactory

ClientName = Literal["squall", "confluent-kafka", "kafka-python"]
CLIENT_NAMES: tuple[str, ...] = get_args(ClientName)
SQUALL = "squall"
RESERVED_PRODUCER_KEYS = ("retries", "message.send.max.retries", "enable.idempotence")
"""Producer settings a Kafka client's producer_config may not set: the retries are the
workload's `producer_retries` and idempotence its `idempotence` (the checkers read both)."""


_LIBRDKAFKA_LOG = logging.getLogger("workloads.confluent_client")


def speaks_kafka(client: str) -> bool:
    """Whether `client` is a Kafka client, which talks to the brokers' second listeners."""
    return client != SQUALL


def client_factory(client: str) -> ClientFactory:
    """The factory of the client library named `client` (one of CLIENT_NAMES)."""
    if client == SQUALL:
        from workloads.squall_client import SquallClientFactory

        return SquallClientFactory()
    if client == "confluent-kafka":
        from workloads.confluent_client import ConfluentClientFactory

        return ConfluentClientFactory()
    if client == "kafka-python":
        from workloads.kafka_python_client import KafkaPythonClientFactory

        return KafkaPythonClientFactory()
    raise ValueError(f"no client {client!r}; choose one of {', '.join(CLIENT_NAMES)}")


def check_kafka_settings(
    client: str, role: Literal["producer", "consumer"], config: Mapping[str, object]
) -> None:
    """Refuse, with ValueError naming the key, settings that the Kafka client `client` does
    not have or that the workload owns. Nothing to check, nothing opened: a spec is read
    again with every stored run's test.json, and librdkafka's check opens a client."""
    if not config:
        return
    if role == "producer":
        reserved = sorted(set(config) & set(RESERVED_PRODUCER_KEYS))
        if reserved:
            raise ValueError(
                f"sets {', '.join(reserved)}, which the workload owns for {client}: use "
                "producer_retries for the retries and idempotence for the idempotent producer"
            )
    if client == "kafka-python":
        import kafka

        from workloads.kafka_python_client import keyword_settings

        known = (
            kafka.KafkaProducer.DEFAULT_CONFIG
            if role == "producer"
            else kafka.KafkaConsumer.DEFAULT_CONFIG
        )
        keyword_settings(config, known)
    elif client == "confluent-kafka":
        import confluent_kafka

        try:
            if role == "producer":
                confluent_kafka.Producer({**config, "logger": _LIBRDKAFKA_LOG})
            else:
                quiet = {"group.id": "squall-check", **config, "logger": _LIBRDKAFKA_LOG}
                confluent_kafka.Consumer(quiet).close()
        except (confluent_kafka.KafkaException, TypeError, ValueError) as err:
            raise ValueError(f"librdkafka refuses the {role} settings: {err}") from None
