"""The job's Prometheus metrics, fed from each micro-batch's progress."""

from __future__ import annotations

import json
import logging
import time

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, disable_created_metrics

from .query import OBSERVATION

__all__ = ["JobMetrics", "ProgressPoller", "log_batch"]

log = logging.getLogger(__name__)

_BATCH_BUCKETS = (0.05, 0.1, 0.2, 0.3, 0.4, 0.5, 0.75, 1, 1.5, 2, 3, 5, 10, 30, 60)

# `*_created` series double every counter's scrape for a timestamp no dashboard or alert uses;
# the sender and receiver do not serve them either.
disable_created_metrics()


class JobMetrics:
    def __init__(self, registry: CollectorRegistry):
        p = "marketspread_job_"
        self.input_rows = Counter(p + "input_rows", "Kafka records read", registry=registry)
        self.input_messages = Counter(p + "input_messages", "fixish messages decoded from them", registry=registry)
        self.rejections = Counter(p + "rejections", "OrderResults written", registry=registry)
        self.dead_letters = Counter(p + "dead_letters", "dead letters written", registry=registry)
        self.batches = Counter(p + "batches", "micro-batches completed", registry=registry)
        self.batch_duration = Histogram(p + "batch_duration_seconds", "micro-batch wall time (triggerExecution)",
                                        buckets=_BATCH_BUCKETS, registry=registry)
        self.batch_phase = Gauge(p + "batch_phase_seconds", "last micro-batch's durationMs breakdown", ["phase"],
                                 registry=registry)
        self.input_rate = Gauge(p + "input_rows_per_second", "input rate of the last progress", registry=registry)
        self.processed_rate = Gauge(p + "processed_rows_per_second", "processing rate of the last progress",
                                    registry=registry)
        self.behind = Gauge(p + "offsets_behind_latest", "Kafka source lag in records", ["stat"], registry=registry)
        self.committed = Gauge(p + "committed_offset", "next offset after the last completed micro-batch",
                               ["topic", "partition"], registry=registry)
        self.state_rows = Gauge(p + "state_rows", "state rows (keys) in the state store", registry=registry)
        self.state_memory = Gauge(p + "state_memory_bytes", "state store memory", registry=registry)
        self.active = Gauge(p + "query_active", "1 while the streaming query runs", registry=registry)
        self.last_progress = Gauge(p + "last_progress_timestamp_seconds", "when the last micro-batch completed",
                                   registry=registry)

    def record(self, progress) -> None:
        self.batches.inc()
        self.input_rows.inc(progress.numInputRows)
        durations = dict(progress.durationMs or {})
        if "triggerExecution" in durations:
            self.batch_duration.observe(durations["triggerExecution"] / 1000)
        for phase, ms in durations.items():
            self.batch_phase.labels(phase).set(ms / 1000)
        self.input_rate.set(_number(progress.inputRowsPerSecond))
        self.processed_rate.set(_number(progress.processedRowsPerSecond))
        observed = (progress.observedMetrics or {}).get(OBSERVATION)
        if observed is not None:
            self.input_messages.inc(observed["messages"] or 0)
            self.rejections.inc(observed["rejections"] or 0)
            self.dead_letters.inc(observed["dead_letters"] or 0)
        for source in progress.sources or ():
            for stat in ("max", "avg", "min"):
                value = (source.metrics or {}).get(f"{stat}OffsetsBehindLatest")
                if value is not None:
                    self.behind.labels(stat).set(float(value))
            for topic, partitions in _offsets(source.endOffset).items():
                for partition, offset in partitions.items():
                    self.committed.labels(topic, str(partition)).set(offset)
        operators = progress.stateOperators or ()
        self.state_rows.set(sum(op.numRowsTotal for op in operators))
        self.state_memory.set(sum(op.memoryUsedBytes for op in operators))
        self.last_progress.set(time.time())


def _number(value) -> float:
    try:
        result = float(value)
    except (TypeError, ValueError):
        return 0.0
    return result if result == result else 0.0  # NaN on the first batch


def _offsets(end_offset) -> dict:
    if not end_offset:
        return {}
    return json.loads(end_offset) if isinstance(end_offset, str) else dict(end_offset)


class ProgressPoller:
    """Feeds JobMetrics from the query's progress, polled from the job's main loop.

    A Python StreamingQueryListener would get the same progress, but pyspark builds each event
    from the JVM object field by field over py4j: about 60 ms of JVM time per micro-batch here.
    `lastProgress` is one call returning JSON; `recentProgress` fills any batch missed between
    two polls, so the counters see every batch exactly once.
    """

    def __init__(self, query, metrics: JobMetrics):
        self.query = query
        self.metrics = metrics
        self.last_batch = -1

    def poll(self) -> None:
        self.metrics.active.set(1 if self.query.isActive else 0)
        last = self.query.lastProgress
        if last is None or last.batchId <= self.last_batch:
            return
        progresses = [last]
        if last.batchId > self.last_batch + 1:
            progresses = [p for p in self.query.recentProgress if self.last_batch < p.batchId <= last.batchId]
        for progress in sorted(progresses, key=lambda p: p.batchId):
            log_batch(progress)
            try:
                self.metrics.record(progress)
            except Exception:  # a metrics bug must never take the job down
                log.exception("could not record the progress of batch %s", progress.batchId)
        self.last_batch = last.batchId


def log_batch(progress) -> None:
    durations = dict(progress.durationMs or {})
    log.info("batch %d: %d rows in %.3f s (%s)", progress.batchId, progress.numInputRows,
             durations.get("triggerExecution", 0) / 1000,
             ", ".join(f"{k} {v / 1000:.3f}" for k, v in durations.items() if k != "triggerExecution"))
