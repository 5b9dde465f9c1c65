"""The sender through a broker outage longer than its delivery timeout: it fails loudly, it never hangs.

Found by `marketspread chaos --scenario broker-restart --broker-down-seconds 100`: when a batch
that had been sent expired in kafka-python 3.0.12's idempotent producer, the producer reset its
producer id but never asked for a new one, and from then on sent nothing and failed nothing: the
sender hung in its final flush forever, with most of its stream neither delivered nor reported
(marketspread/sender/producer_fix.py has the details and the fix).

Here the real sender process streams NBBO to a broker of its own, which is stopped mid-stream and
kept down for longer than the sender's `--delivery-timeout-seconds`, then started again.
Specified: the sender finishes on its own (its final flush is bounded now, whatever the
producer does); it exits non-zero and reports exactly how many messages were not delivered;
every other message was acknowledged; and the end of the stream, sent after the outage, is on
the topic: the producer asked for a new producer id and went on, instead of stalling.
"""

from __future__ import annotations

import re
import time

import numpy as np
import pytest
from kafka import KafkaConsumer, TopicPartition

from marketspread.fixish import Nbbo, decode
from marketspread.generate import generate_nbbo, load_symbol_set
from marketspread.metrics import Samples
from marketspread.run.stack import Stack, free_port
from marketspread.settings import KafkaSettings

pytestmark = [pytest.mark.kafka, pytest.mark.slow, pytest.mark.timeout(300)]

MESSAGES, RATE = 50_000, 2_500  # 20 s of stream: the outage is over well before its end
DELIVERY_TIMEOUT, DOWN = 4, 7


def last_message_on(bootstrap: str, topic: str) -> tuple[int, list[Nbbo]]:
    """How many records the topic holds, and the last record of each partition."""
    consumer = KafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False)
    try:
        partitions = [TopicPartition(topic, p) for p in sorted(consumer.partitions_for_topic(topic))]
        end = consumer.end_offsets(partitions)
        lasts = []
        for tp in partitions:
            consumer.assign([tp])
            consumer.seek(tp, end[tp] - 1)
            records = []
            deadline = time.monotonic() + 30
            while not records:
                assert time.monotonic() < deadline
                records = consumer.poll(timeout_ms=500).get(tp, [])
            lasts.append(decode(records[-1].value))
        return sum(end.values()), lasts
    finally:
        consumer.close()


def test_a_sender_outlived_by_a_broker_outage_reports_what_it_lost_and_delivers_the_rest(tmp_path, wallaroo_data):
    stream = generate_nbbo(load_symbol_set("350", wallaroo_data), MESSAGES, np.random.default_rng(3))
    file = tmp_path / "nbbo.msg"
    file.write_bytes(stream.tobytes())
    port = free_port()
    stack = Stack(KafkaSettings(bootstrap_servers=f"127.0.0.1:{port}"), tmp_path / "out", time.monotonic() + 240,
                  port, free_port(), broker_run_dir=tmp_path / "kafka", broker_heap="256m")
    try:
        stack.ensure_broker()
        assert stack.broker is not None
        stack.fresh_topics(2)
        sender = stack.start_sender("nbbo", file, RATE, 100, delivery_timeout_seconds=DELIVERY_TIMEOUT)
        stack.wait_until(lambda: (sender.metrics() or Samples()).total("marketspread_sender_messages_total")
                         >= MESSAGES / 10, "a tenth of the stream to be acknowledged")
        stack.restart_broker(down_seconds=DOWN)
        code = sender.process.wait(timeout=120)  # before the fixes: never
        on_topic, lasts = last_message_on(stack.kafka.bootstrap_servers, "nbbo")
    finally:
        stack.stop_all()

    log = sender.log_file.read_text()
    acknowledged = int(re.search(r"sent ([\d,]+) nbbo messages", log).group(1).replace(",", ""))
    failed = int(re.search(r"FAILED: [\d,]+ records \(([\d,]+) messages\) not delivered", log).group(1)
                 .replace(",", ""))
    assert code == 1  # DeliveryError: some records were not acknowledged
    assert 0 < failed < MESSAGES and acknowledged + failed == MESSAGES
    # Every acknowledged message is on the topic (and at most the failed ones besides: a failed record may have
    # been appended before the broker went away); the stream's last message, sent after the outage, is there.
    assert acknowledged <= on_topic <= MESSAGES
    wire = stream[-1]
    last = Nbbo(wire["symbol"].decode().lstrip(), float(wire["bid_px"]), float(wire["offer_px"]),
                wire["transact_time"].decode())
    assert last in lasts
    assert "requesting a new producer id" in log
