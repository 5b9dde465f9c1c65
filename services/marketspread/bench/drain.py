"""`marketspread bench-drain`: how fast the job works off a backlog, and where its CPU goes.

Wallaroo's habit for tuning: a small, repeatable experiment per change. The topics are filled
first (N NBBO and N orders, generated, sent unpaced), then the job starts and drains them;
the report gives the drain rate, each micro-batch's durations and the CPU seconds of each JVM
thread group (JIT compilers, executor tasks, the stream execution thread, GC, listeners) and
of the Python workers during the drain. Unlike `marketspread bench` nothing is paced, so it
measures the job alone; compare two settings in one sitting, on a quiet machine.

    marketspread bench-drain --messages 1000000 --max-offsets-per-trigger 200
    marketspread bench-drain --messages 1000000 --max-offsets-per-trigger 200 --job-settings jvm_options=
"""

from __future__ import annotations

import argparse
import collections
import os
import re
import shutil
import tempfile
import time
from pathlib import Path

__all__ = ["drain", "register", "thread_cpu"]

_BATCH = re.compile(r"batch (\d+): (\d+) rows in ([0-9.]+) s \((.*)\)")


def thread_cpu(pid: int) -> collections.Counter:
    """CPU seconds per thread-name group of a process (JVM threads are named by their role)."""
    usage: collections.Counter = collections.Counter()
    ticks = os.sysconf("SC_CLK_TCK")  # /proc counts CPU time in these
    for stat in Path(f"/proc/{pid}/task").glob("*/stat"):
        try:
            raw = stat.read_text()
        except OSError:
            continue
        name = re.sub(r"[0-9#-]+$", "", raw[raw.index("(") + 1:raw.rindex(")")]).strip()
        fields = raw[raw.rindex(")") + 2:].split()
        usage[name] += (int(fields[11]) + int(fields[12])) / ticks
    return usage


def register(subparsers) -> None:
    parser = subparsers.add_parser("bench-drain", help="time the job working off a backlog; CPU per JVM thread group",
                                   description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--messages", type=int, default=1_000_000, help="NBBO and as many orders (default 1,000,000)")
    parser.add_argument("--symbols", default="350", help="symbol set, as for `marketspread generate` (default 350)")
    parser.add_argument("--record-format", choices=("framed", "message"), default="framed")
    parser.add_argument("--batch-size", type=int, default=10_000,
                        help="sender batch: one framed record per shard per batch (default 10,000)")
    parser.add_argument("--max-offsets-per-trigger", type=int, default=200, help="records per micro-batch (default 200)")
    parser.add_argument("--job-settings", default="", help="extra job settings, name=value[,name=value]")
    parser.add_argument("--seed", type=int, default=3)
    parser.set_defaults(func=_run)


def _run(args) -> int:
    d = drain(args.messages, args.symbols, args.record_format, args.batch_size, args.max_offsets_per_trigger,
              args.job_settings, args.seed)
    print(f"drain: {d['messages']:,} messages ({args.symbols} symbols, {args.record_format}, sender batch "
          f"{args.batch_size:,}, {args.max_offsets_per_trigger} records per micro-batch, job settings {d['settings']})")
    print(f"  job ready in {d['ready_seconds']:.1f} s; drained in {d['drain_seconds']:.1f} s after that: "
          f"{d['msgs_per_s']:,.0f} msgs/s (first batches' warm-up included)")
    print("  JVM CPU s by thread group: " + ", ".join(
        f"{name} {seconds:.1f}" for name, seconds in sorted(d["jvm_cpu_seconds"].items(), key=lambda kv: -kv[1])
        if seconds >= 0.2))
    print(f"  Python workers and driver: {d['python_cpu_seconds']:.1f} CPU s")
    if d["batch_median_seconds"] is not None:
        print(f"  micro-batches after the third: {d['batches']}, median {d['batch_median_seconds']:.3f} s, "
              f"max {d['batch_max_seconds']:.3f} s")
    return 0


def drain(messages: int, symbols: str = "350", record_format: str = "framed", batch_size: int = 10_000,
          max_offsets_per_trigger: int = 200, job_settings: str = "", seed: int = 3) -> dict:
    """Fill fresh topics on a broker of its own, start the job, time it working them off; a dict of figures."""
    import psutil

    from ..cli import main
    from ..settings import KafkaSettings
    from ..run.stack import Stack, free_port
    from .systems import parse_job_settings

    work = Path(tempfile.mkdtemp(prefix="marketspread-drain-"))
    try:
        data = work / "data"
        main(["generate", "--symbols", symbols, "--nbbo", str(messages), "--orders", str(messages),
              "--seed", str(seed), "--out", str(data)])
        port = free_port()
        kafka = KafkaSettings(bootstrap_servers=f"127.0.0.1:{port}", record_format=record_format)
        stack = Stack(kafka, work / "out", time.monotonic() + 3600, port, free_port(), broker_run_dir=work / "kafka")
        try:
            stack.ensure_broker()
            stack.fresh_topics(2)
            for stream in ("nbbo", "orders"):
                stack.wait_finished(stack.start_sender(stream, data / f"{stream}.msg", 0, batch_size))
            settings = {"max_offsets_per_trigger": max_offsets_per_trigger, **parse_job_settings(job_settings)}
            started = time.time()
            job = stack.start_job(work / "out" / "checkpoint", **settings)
            stack.wait_job_ready()
            ready = time.time()
            tree = psutil.Process(job.pid).children(recursive=True)
            jvm = next(p for p in tree if "SparkSubmit" in " ".join(p.cmdline()))
            python = [p for p in tree if p.name().startswith("python")]
            cpu_before, py_before = thread_cpu(jvm.pid), sum(sum(p.cpu_times()[:2]) for p in python)
            stack.wait_processed()
            done = time.time()
            cpu = thread_cpu(jvm.pid)
            py_after = sum(sum(p.cpu_times()[:2]) for p in psutil.Process(job.pid).children(recursive=True)
                           if p.name().startswith("python"))
            log = job.log_file.read_text()
        finally:
            stack.stop_all()
        batches = [_BATCH.search(line) for line in log.splitlines()]
        durations = sorted(float(m.group(3)) for m in batches if m and int(m.group(1)) > 2)
        total = 2 * messages
        return {"symbols": symbols, "record_format": record_format, "messages": total, "batch_size": batch_size,
                "settings": settings,
                "ready_seconds": round(ready - started, 2), "drain_seconds": round(done - ready, 2),
                "msgs_per_s": round(total / (done - ready)),
                "jvm_cpu_seconds": {name: round(cpu[name] - cpu_before.get(name, 0), 2) for name in cpu},
                "python_cpu_seconds": round(py_after - py_before, 2), "batches": len(durations),
                "batch_median_seconds": durations[len(durations) // 2] if durations else None,
                "batch_max_seconds": durations[-1] if durations else None}
    finally:
        shutil.rmtree(work, ignore_errors=True)
