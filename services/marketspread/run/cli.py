"""`marketspread run` (any inputs) and `marketspread demo` (generated streams on Wallaroo's 350 symbols)."""

from __future__ import annotations

from ..settings import add_arguments, from_args
from .settings import RunSettings

__all__ = ["register"]

EXIT_WRONG_RESULTS = 3


def register(subparsers) -> None:
    parser = subparsers.add_parser(
        "run", help="run broker, job, receiver and senders on input files; compare with the reference model",
        description="Send framed fixish files through the real pipeline and check every rejection against an "
                    "independent reference model. Writes OUT/rejections.msg and OUT/summary.json.")
    add_arguments(parser, RunSettings)
    parser.set_defaults(func=_run)

    demo = subparsers.add_parser(
        "demo", help="generate streams for Wallaroo's 350 symbols and run them end to end",
        description="The README's demo: generate NBBO and order streams (seeded) for the 350-symbol set, then "
                    "`marketspread run` them with Wallaroo's initial NBBO file.")
    demo.add_argument("--out", default="out/demo", help="output directory (default out/demo)")
    demo.add_argument("--messages", type=int, default=300_000, help="messages per stream (default 300,000)")
    demo.add_argument("--rate", type=float, default=20_000, help="messages per second per stream (default 20,000)")
    demo.add_argument("--seed", type=int, default=42, help="generator seed (default 42)")
    demo.add_argument("--reject-ratio", type=float, default=0.0005,
                      help="share of orders on rejecting symbols (default 0.0005, so the demo shows some)")
    # Framed records (many messages per Kafka record, as a market-data packet carries them) are what
    # the job is tuned for; one message per record is the other documented format, slower per message.
    demo.add_argument("--record-format", choices=("framed", "message"), default="framed",
                      help="Kafka record format (default framed; see docs/architecture.md)")
    demo.set_defaults(func=_demo)


def _execute(settings: RunSettings) -> int:
    from .orchestrator import Run
    from .summary import render

    summary = Run(settings).execute()
    print(render(summary))
    return 0 if summary["correct"] else EXIT_WRONG_RESULTS


def _run(args) -> int:
    return _execute(from_args(RunSettings, args))


def _demo(args) -> int:
    from pathlib import Path

    from ..cli import main
    from ..generate.cli import INITIAL_FILE, NBBO_FILE, ORDERS_FILE

    data = Path(args.out) / "data"
    generated = main(["generate", "--symbols", "350", "--nbbo", str(args.messages), "--orders", str(args.messages),
                      "--seed", str(args.seed), "--reject-ratio", str(args.reject_ratio), "--out", str(data)])
    if generated:
        return generated
    return _execute(RunSettings(initial_nbbo=str(data / INITIAL_FILE), nbbo=str(data / NBBO_FILE),
                                orders=str(data / ORDERS_FILE), out=args.out, rate=args.rate,
                                record_format=args.record_format))
