"""`marketspread bench` (the harness), `bench-peer` (a peer system), `bench-probe` (the passthrough's probe),
`bench-drain` (the job working off a backlog, for tuning)."""

from __future__ import annotations

import logging
import threading

from ..settings import add_arguments, from_args
from .settings import BenchSettings, PeerSettings, ProbeSettings

__all__ = ["register"]


def register(subparsers) -> None:
    bench = subparsers.add_parser(
        "bench", help="benchmark spark or a peer (passthrough, plain, plain-bulk, quix): open-loop load, latency, max rate",
        description="Open-loop load at a fixed rate (NBBO + orders, half each, generated, after Wallaroo's initial "
                    "NBBO) on a private Kafka broker; latency from each message's intended send time; sustained "
                    "throughput, lag trend, loss, CPU and RSS per process tree. Writes OUT/bench.json and "
                    "OUT/bench.png. --find-max searches the highest sustainable rate; --all runs the whole "
                    "comparison and writes docs/benchmarks.md.")
    add_arguments(bench, BenchSettings)
    bench.set_defaults(func=_bench)

    peer = subparsers.add_parser("bench-peer", help="run a peer of the Spark job (used by `bench`)",
                                 description="A peer system for `marketspread bench`: passthrough, plain, plain-bulk or quix.")
    add_arguments(peer, PeerSettings)
    peer.set_defaults(func=_peer)

    probe = subparsers.add_parser("bench-probe", help="measure the passthrough's latency (used by `bench`)",
                                  description="Consume the passthrough topic; record receive time, record "
                                              "timestamp and message count of every record.")
    add_arguments(probe, ProbeSettings)
    probe.set_defaults(func=_probe)

    from .drain import register as register_drain

    register_drain(subparsers)


def _bench(args) -> int:
    from pathlib import Path

    from .machine import LoadWatch
    from .progress import ProgressLine
    from .runner import print_result, search_run, single_run
    from .session import BrokerHandle

    settings = from_args(BenchSettings, args)
    command = command_of(args)
    if settings.all:
        from .suite import run_suite

        return run_suite(settings, command)
    out = Path(settings.out)
    progress = ProgressLine(settings.progress)
    load = LoadWatch()
    broker = BrokerHandle(settings, out)
    progress.show("[bench]", None, "starting Kafka")
    try:
        broker.start()
        if settings.find_max:
            doc = search_run(broker, settings, out, progress, load, command=command)
        else:
            doc = single_run(broker, settings, out, progress, load, command=command)
    finally:
        progress.end()
        broker.stop()
    print_result(doc)
    print(f"  results      {out / 'bench.json'}, {out / 'bench.png'}")
    return 0


def command_of(args) -> str:
    """The command as given (flags only; settings from the environment are not repeated)."""
    import shlex

    words = ["marketspread", "bench"]
    for name, value in vars(args).items():
        if name not in BenchSettings.model_fields:
            continue
        flag = "--" + name.replace("_", "-")
        if isinstance(value, bool):
            words.append(flag if value else "--no-" + flag[2:])
        else:
            words += [flag, str(value)]
    return shlex.join(words)


def _peer(args) -> int:
    from ..stopping import install_stop_signals
    from .peers import run_peer

    logging.getLogger("kafka").setLevel(logging.WARNING)
    settings = from_args(PeerSettings, args)
    stop = threading.Event()
    install_stop_signals(stop, f"stopping the {settings.system} peer")
    run_peer(settings, stop)
    return 0


def _probe(args) -> int:
    from ..stopping import install_stop_signals
    from .peers.probe import run

    settings = from_args(ProbeSettings, args)
    stop = threading.Event()
    install_stop_signals(stop, "stopping the probe")
    run(settings, stop)
    return 0
