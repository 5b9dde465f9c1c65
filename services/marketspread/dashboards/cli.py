"""`marketspread dashboards generate|push`."""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

__all__ = ["register"]


def register(subparsers) -> None:
    parser = subparsers.add_parser("dashboards", help="generate the Grafana dashboards, or push them to a Grafana",
                                   description=__doc__)
    actions = parser.add_subparsers(dest="action", required=True, metavar="ACTION")

    generate = actions.add_parser("generate", help="write the chart's dashboard JSON from the metric names")
    generate.add_argument("--out", type=Path, default=None,
                          help="directory to write to (default: charts/market-spread/dashboards)")
    generate.add_argument("--check", action="store_true", help="write nothing; exit 1 if the files differ")
    generate.set_defaults(func=_generate)

    push = actions.add_parser("push", help="upload the dashboards with grafana-client (for a Grafana without "
                                           "the dashboard sidecar)")
    push.add_argument("--url", default=os.environ.get("GRAFANA_URL"),
                      help="Grafana URL, credentials may be in it (default: $GRAFANA_URL)")
    push.add_argument("--token", default=os.environ.get("GRAFANA_TOKEN"),
                      help="service-account token (default: $GRAFANA_TOKEN)")
    push.add_argument("--folder", default="Market Spread", help="folder title (created when missing)")
    push.set_defaults(func=_push)


def _generate(args: argparse.Namespace) -> int:
    from .generate import CHART_DASHBOARD_DIR, write_dashboards

    directory = args.out or CHART_DASHBOARD_DIR
    differing = write_dashboards(directory, check=args.check)
    if args.check and differing:
        print(f"dashboards differ from the generator: {', '.join(differing)}; "
              "run `marketspread dashboards generate`", file=sys.stderr)
        return 1
    verb = "would change" if args.check else "wrote"
    print(f"{verb} {len(differing)} dashboard file(s) in {directory}")
    return 0


def _push(args: argparse.Namespace) -> int:
    from .push import connect, push_dashboards

    uids = push_dashboards(connect(args.url, args.token), folder=args.folder)
    print(f"pushed {len(uids)} dashboard(s): {', '.join(uids)}")
    return 0
