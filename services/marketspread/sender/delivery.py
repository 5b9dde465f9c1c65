"""Delivery accounting: what Kafka acknowledged, what failed, and how much is still in flight.

Callbacks run on kafka-python's I/O thread; the sending thread reads the totals and waits on
the in-flight volume (kafka-python 3 has no buffer_memory bound, so without this an unpaced
sender would queue a whole file in memory). No failure is ever dropped: each is counted,
logged (the first ones in full, then a running total), and makes the sender exit non-zero.
"""

from __future__ import annotations

import logging
import threading

__all__ = ["Delivery"]

log = logging.getLogger(__name__)

_LOG_FIRST_ERRORS = 10
_LOG_EVERY_ERRORS = 1000


class Delivery:
    """Totals for one phase (initial NBBO or the stream) on one topic."""

    def __init__(self, topic: str, message_bytes: int = 0):
        self.topic = topic
        self.message_bytes = message_bytes  # value size of a one-message record (`message` format)
        self._lock = threading.Lock()
        self._drained = threading.Condition(self._lock)
        self.messages = 0
        self.records = 0
        self.bytes = 0
        self.failed_records = 0
        self.failed_messages = 0
        self.submitted_messages = 0
        self.pending_bytes = 0
        self.last_error: BaseException | None = None
        self._waiters = 0

    def submitted(self, messages: int, value_bytes: int) -> None:
        with self._lock:
            self.submitted_messages += messages
            self.pending_bytes += value_bytes

    def acknowledged(self, messages: int, value_bytes: int, _metadata=None) -> None:
        with self._lock:
            self.messages += messages
            self.records += 1
            self.bytes += value_bytes
            self.pending_bytes -= value_bytes
            if self._waiters:
                self._drained.notify_all()

    # One-message records (`message` format) complete by the thousand per produce response:
    # these skip building a functools.partial per record on the way in and out.
    def acknowledged_message(self, _metadata=None) -> None:
        self.acknowledged(1, self.message_bytes)

    def failed_message(self, error: BaseException) -> None:
        self.failed(1, self.message_bytes, error)

    def failed(self, messages: int, value_bytes: int, error: BaseException) -> None:
        with self._lock:
            self.failed_records += 1
            self.failed_messages += messages
            self.pending_bytes -= value_bytes
            self.last_error = error
            failures = self.failed_records
            if self._waiters:
                self._drained.notify_all()
        if failures <= _LOG_FIRST_ERRORS:
            log.error("record of %d messages to %s was not delivered: %r", messages, self.topic, error)
        elif failures % _LOG_EVERY_ERRORS == 0:
            log.error("%d records to %s not delivered so far; latest: %r", failures, self.topic, error)

    def abandon_pending(self, reason: str) -> None:
        """Count every submitted message without an outcome yet as failed (the producer gave up on them)."""
        with self._lock:
            pending = self.submitted_messages - self.messages - self.failed_messages
            if pending <= 0:
                return
            self.failed_messages += pending
            self.failed_records += 1
            self.pending_bytes = 0
            self.last_error = TimeoutError(reason)
        log.error("%d messages to %s have no delivery outcome: %s", pending, self.topic, reason)

    def wait_in_flight_below(self, limit_bytes: int, stop: threading.Event | None = None,
                             poll_seconds: float = 0.1) -> None:
        """Block while more than `limit_bytes` of values await acknowledgement (Giles pauses likewise)."""
        with self._lock:
            self._waiters += 1
            try:
                while self.pending_bytes > limit_bytes and not (stop is not None and stop.is_set()):
                    self._drained.wait(poll_seconds)
            finally:
                self._waiters -= 1
