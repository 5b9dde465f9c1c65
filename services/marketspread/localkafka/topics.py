"""Topics and offsets: created by the project with explicit partition counts, read back for progress."""

from __future__ import annotations

import time
from collections.abc import Iterable

from .errors import BrokerError

__all__ = ["ensure_topics", "delete_topics", "end_offsets", "group_offsets", "admin_client"]


def admin_client(bootstrap_servers: str):
    from kafka.admin import KafkaAdminClient

    return KafkaAdminClient(bootstrap_servers=bootstrap_servers, client_id="marketspread-admin",
                            request_timeout_ms=15000)


def ensure_topics(bootstrap_servers: str, names: Iterable[str], partitions: int, recreate: bool = False) -> dict[str, int]:
    """Create missing topics; return each topic's partition count (existing topics keep theirs)."""
    names = list(dict.fromkeys(names))
    admin = admin_client(bootstrap_servers)
    try:
        existing = set(admin.list_topics())
        if recreate and (doomed := [n for n in names if n in existing]):
            admin.delete_topics(doomed)
            _wait_gone(admin, doomed)
            existing -= set(doomed)
        missing = [n for n in names if n not in existing]
        if missing:
            admin.create_topics({n: {"num_partitions": partitions, "replication_factor": 1} for n in missing},
                                wait_for_metadata=True)
        described = admin.describe_topics(names)
        return {t["name"]: len(t["partitions"]) for t in described}
    finally:
        admin.close()


def delete_topics(bootstrap_servers: str, names: Iterable[str]) -> None:
    admin = admin_client(bootstrap_servers)
    try:
        present = [n for n in names if n in set(admin.list_topics())]
        if present:
            admin.delete_topics(present)
            _wait_gone(admin, present)
    finally:
        admin.close()


def _wait_gone(admin, names: list[str], timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if not set(names) & set(admin.list_topics()):
            return
        time.sleep(0.2)
    raise BrokerError(f"topics {names} were not deleted within {timeout:.0f} s")


def end_offsets(bootstrap_servers: str, topics: Iterable[str]) -> dict[tuple[str, int], int]:
    """The next offset to be written, per (topic, partition)."""
    from kafka import KafkaConsumer, TopicPartition

    consumer = KafkaConsumer(bootstrap_servers=bootstrap_servers, client_id="marketspread-offsets",
                             enable_auto_commit=False)
    try:
        partitions = [TopicPartition(t, p) for t in topics for p in sorted(consumer.partitions_for_topic(t) or ())]
        return {(tp.topic, tp.partition): offset for tp, offset in consumer.end_offsets(partitions).items()}
    finally:
        consumer.close()


def group_offsets(bootstrap_servers: str, group_id: str) -> dict[tuple[str, int], int]:
    """Committed offsets of a consumer group, per (topic, partition)."""
    admin = admin_client(bootstrap_servers)
    try:
        committed = admin.list_group_offsets({group_id: None}).get(group_id, {})
        return {(tp.topic, tp.partition): meta.offset for tp, meta in committed.items()}
    finally:
        admin.close()
