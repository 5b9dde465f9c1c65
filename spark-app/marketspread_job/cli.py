"""`marketspread job`: the Spark job, locally (local[2] by default) or under spark-submit."""

from __future__ import annotations

from marketspread.settings import add_arguments, from_args

from .settings import JobSettings

__all__ = ["register"]


def register(subparsers) -> None:
    parser = subparsers.add_parser("job", help="run the Spark Structured Streaming job",
                                   description="Read nbbo and orders from Kafka, keep the latest quote per symbol, "
                                               "write the orders to withdraw to the rejections topic.")
    add_arguments(parser, JobSettings)
    parser.set_defaults(func=_run)


def _run(args) -> int:
    from .app import run

    run(from_args(JobSettings, args))
    return 0
