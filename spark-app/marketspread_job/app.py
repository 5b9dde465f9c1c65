"""Run the job until it fails or is told to stop (SIGTERM, Ctrl-C), serving its metrics meanwhile."""

from __future__ import annotations

import logging
import signal
import threading

from prometheus_client import CollectorRegistry

from marketspread.errors import MarketSpreadError
from marketspread.metrics import serve

from .settings import JobSettings

__all__ = ["run", "JobFailed", "failure_message"]

log = logging.getLogger(__name__)


class JobFailed(MarketSpreadError):
    pass


def failure_message(spark_error: str, settings: JobSettings) -> str:
    message = f"the streaming query failed: {spark_error}"
    if "STREAMING_STATEFUL_OPERATOR_NOT_MATCH_IN_STATE_METADATA" in spark_error:
        # What a changed state_operator (an upgrade's new default, say) looks like from inside Spark.
        message += (f"\nThe checkpoint {settings.checkpoint_dir} was written by another state operator than "
                    f"state_operator={settings.state_operator}: set state_operator to the one it was written "
                    "with, or point checkpoint_dir at a new location (the job then starts from starting_offsets).")
    return message


def run(settings: JobSettings, stop: threading.Event | None = None) -> None:
    from .metrics import JobMetrics, ProgressPoller
    from .query import start_query
    from .session import build_session

    stop = stop or threading.Event()
    if threading.current_thread() is threading.main_thread():
        for signum in (signal.SIGTERM, signal.SIGINT):
            signal.signal(signum, lambda *_: stop.set())

    registry = CollectorRegistry()
    metrics = JobMetrics(registry)
    server = serve(registry, settings.metrics_port)
    spark = build_session(settings)
    try:
        query = start_query(spark, settings)
        metrics.active.set(1)
        log.info("query %s started: %s,%s -> %s, checkpoint %s", query.id, settings.nbbo_topic,
                 settings.orders_topic, settings.rejections_topic, settings.checkpoint_dir)
        poller = ProgressPoller(query, metrics)
        # Poll rather than block: progress reaches the metrics promptly and a signal is acted on.
        while not stop.is_set():
            terminated = query.awaitTermination(0.1)
            poller.poll()
            if terminated:
                break
        if query.isActive:
            query.stop()
        if (error := query.exception()) is not None:
            raise JobFailed(failure_message(error.desc if hasattr(error, "desc") else str(error), settings))
    finally:
        metrics.active.set(0)
        spark.stop()
        if server is not None:
            server.shutdown()
