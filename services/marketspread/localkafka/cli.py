"""`marketspread kafka start|stop|status|topics`: the local broker."""

from __future__ import annotations

import argparse

from ..settings import KafkaSettings, add_arguments, from_args
from .settings import BrokerSettings

__all__ = ["register"]


def register(subparsers) -> None:
    parser = subparsers.add_parser("kafka", help="start, stop or inspect the local Kafka broker; create topics",
                                   description=__doc__)
    actions = parser.add_subparsers(dest="action", required=True, metavar="ACTION")
    for name, func, text in (
        ("start", _start, "start the broker (KRaft, loopback) unless it runs; wait until it answers"),
        ("stop", _stop, "stop the broker (controlled shutdown)"),
        ("status", _status, "say whether the broker runs; exit 1 if not"),
        ("topics", _topics, "create the project's topics (nbbo, orders, rejections, dead-letters)"),
    ):
        sub = actions.add_parser(name, help=text, description=text)
        add_arguments(sub, BrokerSettings)
        if name == "topics":
            sub.add_argument("--recreate", action="store_true", help="delete and create them again (data is lost)")
            for option in ("nbbo_topic", "orders_topic", "rejections_topic", "dead_letter_topic"):
                info = KafkaSettings.model_fields[option]
                sub.add_argument("--" + option.replace("_", "-"), dest=option, default=argparse.SUPPRESS,
                                 help=info.description)
        sub.set_defaults(func=func)


def _broker(args):
    from .broker import LocalKafka

    return LocalKafka(from_args(BrokerSettings, args))


def _start(args) -> int:
    status = _broker(args).start()
    print(status)
    return 0


def _stop(args) -> int:
    broker = _broker(args)
    print("kafka stopped" if broker.stop() else f"kafka was not running ({broker.run_dir})")
    return 0


def _status(args) -> int:
    status = _broker(args).status()
    print(status)
    return 0 if status.running else 1


def _topics(args) -> int:
    from .topics import ensure_topics

    broker = _broker(args)
    topic_settings = KafkaSettings(**{k: v for k, v in vars(args).items() if k in KafkaSettings.model_fields})
    names = [topic_settings.nbbo_topic, topic_settings.orders_topic, topic_settings.rejections_topic,
             topic_settings.dead_letter_topic]
    counts = ensure_topics(broker.bootstrap_servers, names, broker.settings.partitions, recreate=args.recreate)
    for name in names:
        print(f"{name}: {counts[name]} partitions")
    return 0
