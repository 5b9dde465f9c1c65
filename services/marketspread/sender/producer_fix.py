"""A fix for kafka-python 3.0.12's idempotent producer, applied before the sender builds its producer.

The bug (found by `marketspread chaos --scenario broker-restart --broker-down-seconds 100`):
when a batch that had already been sent expires (the broker was away for longer than
`delivery.timeout.ms`), the producer resets its producer id, as the Java client does, because
it cannot know whether the broker appended that batch. But kafka-python leaves its transaction
manager in READY, while `init_producer_id()` only acts in UNINITIALIZED and the I/O thread sends
nothing without a producer id: from then on the producer never sends again, never fails a
record either, and `flush()` never returns. The sender hung with tens of thousands of messages
neither delivered nor reported.

The Java client's `resetIdempotentProducerId` moves to UNINITIALIZED, so that the next loop of
the I/O thread asks for a new producer id; this does the same. The expired records are still
reported as failed (the sender counts them and exits non-zero: re-sending them could write an
NBBO twice, the second time after newer quotes), and every later record is delivered under the
new producer id. Pinned to the version it was found in: a new kafka-python must be checked again
(tests/integration/test_sender_outage.py shows the symptom).
"""

from __future__ import annotations

import logging

__all__ = ["apply", "AFFECTED_VERSION"]

log = logging.getLogger(__name__)

AFFECTED_VERSION = "3.0.12"


def apply() -> bool:
    """Patch `TransactionManager.reset_producer_id` once; False if kafka-python is not the affected version."""
    import kafka
    from kafka.producer import transaction_manager as tm

    if kafka.__version__ != AFFECTED_VERSION:
        log.warning("kafka-python %s, not %s: the idempotent-producer reset fix is not applied; check whether "
                    "this version still hangs after an expired batch", kafka.__version__, AFFECTED_VERSION)
        return False
    manager = tm.TransactionManager
    if getattr(manager.reset_producer_id, "_marketspread_fix", False):
        return True
    original = manager.reset_producer_id

    def reset_producer_id(self) -> None:
        original(self)
        if not self.is_transactional():
            with self._lock:
                # kafka-python's state table forbids any transition to UNINITIALIZED; the Java client makes
                # exactly this one here, so that a new producer id is requested before anything is sent.
                log.warning("idempotent producer reset after an expired or failed batch: requesting a new "
                            "producer id")
                self._current_state = tm.TransactionState.UNINITIALIZED

    reset_producer_id._marketspread_fix = True
    manager.reset_producer_id = reset_producer_id
    return True
