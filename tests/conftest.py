"""Fixtures shared by every test: the Wallaroo data files, a real Kafka broker, unique topics.

The broker is the real Apache Kafka 4 from `make setup`, started once per session on free
loopback ports in a temporary directory and stopped at the end; each test that needs topics
gets its own names, so tests never see each other's records.
"""

from __future__ import annotations

import itertools
import uuid
from pathlib import Path

import pytest

from marketspread.paths import wallaroo_data_dir
from marketspread.run.stack import free_port
from marketspread.settings import KafkaSettings


@pytest.fixture(scope="session")
def wallaroo_data() -> Path:
    path = wallaroo_data_dir()
    if not (path / "350-symbols_initial-nbbo-fixish.msg").exists():
        pytest.fail(f"Wallaroo's data files are not at {path}: set MARKETSPREAD_WALLAROO_DATA", pytrace=False)
    return path


@pytest.fixture(scope="session")
def kafka_broker(tmp_path_factory):
    """A real single-node Kafka (KRaft) for the whole session."""
    from marketspread.localkafka import BrokerSettings, LocalKafka

    broker = LocalKafka(BrokerSettings(port=free_port(), controller_port=free_port(),
                                       run_dir=str(tmp_path_factory.mktemp("kafka")), heap="512m"))
    broker.start()
    yield broker
    broker.stop()


_topic_counter = itertools.count()


@pytest.fixture
def kafka_topics(kafka_broker):
    """Factory: `kafka_topics(partitions=2, **settings)` -> KafkaSettings naming fresh topics on the broker."""
    from marketspread.localkafka import ensure_topics

    def make(partitions: int = 2, **overrides) -> KafkaSettings:
        suffix = f"{next(_topic_counter)}-{uuid.uuid4().hex[:6]}"
        settings = KafkaSettings(
            bootstrap_servers=kafka_broker.bootstrap_servers,
            nbbo_topic=f"nbbo-{suffix}", orders_topic=f"orders-{suffix}",
            rejections_topic=f"rejections-{suffix}", dead_letter_topic=f"dead-letters-{suffix}",
            **overrides,
        )
        ensure_topics(kafka_broker.bootstrap_servers, [settings.nbbo_topic, settings.orders_topic,
                                                       settings.rejections_topic, settings.dead_letter_topic],
                      partitions)
        return settings

    return make
