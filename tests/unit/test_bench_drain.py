"""`bench-drain` attributes CPU to thread groups by the names the JVM gives its threads."""

import os
import threading
import time

from marketspread.bench.drain import thread_cpu


def _spin(seconds: float) -> None:
    end = time.process_time() + seconds
    while time.process_time() < end:
        pass


def test_thread_cpu_groups_numbered_threads_under_one_name_and_counts_their_cpu():
    workers = [threading.Thread(target=_spin, args=(0.15,), name=f"spinner-{n}") for n in range(2)]
    for worker in workers:
        worker.start()
    # Sample while they are alive: a finished thread's CPU leaves /proc/<pid>/task with it.
    time.sleep(0.05)
    usage = thread_cpu(os.getpid())
    for worker in workers:
        worker.join()

    assert all(not name[-1:].isdigit() for name in usage), usage
    assert sum(usage.values()) > 0
