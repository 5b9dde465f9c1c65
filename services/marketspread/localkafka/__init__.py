"""The local Apache Kafka broker the project starts and stops on this machine, and its topics."""

from .broker import BrokerStatus, LocalKafka, port_in_use
from .errors import BrokerError
from .settings import BrokerSettings
from .topics import delete_topics, end_offsets, ensure_topics, group_offsets

__all__ = ["LocalKafka", "BrokerStatus", "BrokerSettings", "BrokerError", "port_in_use", "ensure_topics",
           "delete_topics", "end_offsets", "group_offsets"]
