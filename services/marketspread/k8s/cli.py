"""`marketspread k8s status`: the release on a Kubernetes cluster, on one screen."""

from __future__ import annotations

import argparse
import json
import os

__all__ = ["register"]


def register(subparsers) -> None:
    parser = subparsers.add_parser("k8s", help="the chart's release on a Kubernetes cluster, through its API server",
                                   description=__doc__)
    actions = parser.add_subparsers(dest="action", required=True, metavar="ACTION")
    status = actions.add_parser(
        "status", help="the SparkApplication's state, every pod with its node and QoS class, the KafkaTopics "
                       "and the receiver's latest figures",
        description="Reads the Kubernetes API (kubeconfig, or the pod's service account inside the cluster) "
                    "and the receiver's /metrics; writes nothing.")
    status.add_argument("-n", "--namespace", default=os.environ.get("MARKETSPREAD_K8S_NAMESPACE", "market-spread"),
                        help="namespace of the release (default: $MARKETSPREAD_K8S_NAMESPACE, else market-spread)")
    status.add_argument("--release", default=os.environ.get("MARKETSPREAD_K8S_RELEASE", "market-spread"),
                        help="Helm release name (default: $MARKETSPREAD_K8S_RELEASE, else market-spread)")
    status.add_argument("--kubeconfig", default=None, help="kubeconfig file (default: $KUBECONFIG, else ~/.kube/config)")
    status.add_argument("--context", default=None, help="kubeconfig context (default: the current one)")
    status.add_argument("--in-cluster", action="store_true",
                        help="use the pod's service account (the default inside a pod without a kubeconfig)")
    status.add_argument("--receiver-metrics-url", default=None,
                        help="scrape the receiver here (e.g. http://localhost:9102/metrics after a port-forward) "
                             "instead of through the API server's service proxy")
    status.add_argument("--json", action="store_true", help="print the same as JSON")
    status.set_defaults(func=_status)


def _status(args: argparse.Namespace) -> int:
    from .status import collect, connect, render

    connection = connect(args.kubeconfig, args.context, args.in_cluster)
    result = collect(connection, args.namespace, args.release, args.receiver_metrics_url)
    if args.json:
        print(json.dumps(result.to_json(), indent=2))
    else:
        print(render(result), end="")
    return 0
