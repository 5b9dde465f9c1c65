"""`marketspread chaos`: inject a real fault mid-stream (job-kill, receiver-kill, broker-restart, all) and check
that, after dedupe by order id, the rejections equal the reference model's."""

from __future__ import annotations

from ..settings import add_arguments, from_args
from .settings import ChaosSettings

__all__ = ["register", "EXIT_FAILED"]

EXIT_FAILED = 3


def register(subparsers) -> None:
    parser = subparsers.add_parser(
        "chaos", help="kill the job or the receiver, or restart the broker, mid-stream; check nothing is lost",
        description="Run the whole pipeline on its own broker with concurrent streams, inject a real fault "
                    "mid-stream, recover, and compare the received rejections (deduplicated by order id) with the "
                    "reference model. Writes OUT/<scenario>/summary.json (and OUT/summary.json for all). Without "
                    "input files, generates seeded streams on the chosen symbol set into OUT/data.")
    add_arguments(parser, ChaosSettings)
    parser.set_defaults(func=_run)


def _settings(args) -> ChaosSettings:
    from pydantic import ValidationError

    from ..errors import MarketSpreadError

    try:
        return from_args(ChaosSettings, args)
    except ValidationError as error:
        problems = "; ".join(f"--{'.'.join(map(str, e['loc'])).replace('_', '-')}: {e['msg']}" for e in error.errors())
        raise MarketSpreadError(f"invalid options: {problems}") from None


def _inputs(settings: ChaosSettings):
    from pathlib import Path

    from ..cli import main
    from ..errors import MarketSpreadError
    from ..generate.cli import INITIAL_FILE, NBBO_FILE, ORDERS_FILE
    from .runner import ChaosInputs

    files = (settings.initial_nbbo, settings.nbbo, settings.orders)
    if any(files) and not all(files):
        raise MarketSpreadError("give all three of --initial-nbbo, --nbbo and --orders, or none to generate them")
    if all(files):
        paths = [Path(f) for f in files]
    else:
        data = Path(settings.out) / "data"
        code = main(["generate", "--symbols", settings.symbols, "--nbbo", str(settings.messages),
                     "--orders", str(settings.messages), "--seed", str(settings.seed),
                     "--reject-ratio", str(settings.reject_ratio), "--out", str(data)])
        if code:
            raise MarketSpreadError(f"generating the streams into {data} failed")
        paths = [data / INITIAL_FILE, data / NBBO_FILE, data / ORDERS_FILE]
    return ChaosInputs.load(*paths, batch_size=settings.batch_size)


def _run(args) -> int:
    import logging

    from .report import render
    from .runner import run_chaos

    # kafka-python's event loop complains of its own slow tasks while the input topics are read back.
    logging.getLogger("kafka.net.selector").setLevel(logging.ERROR)
    settings = _settings(args)
    inputs = _inputs(settings)
    summary = run_chaos(settings, inputs)
    print(render(summary), flush=True)
    return 0 if summary["passed"] else EXIT_FAILED
