"""Settings: one frozen object per service, read in one place.

Precedence: an explicit command-line flag, then the environment (`MARKETSPREAD_<FIELD>`), then
the default. The same field names are the keys of each component's `settings:` block in the
Helm chart (`charts/market-spread/values.yaml`), which the chart turns into those environment
variables, so a knob has one name everywhere: `batch_size`, `--batch-size`,
`MARKETSPREAD_BATCH_SIZE`, `sender.settings.batch_size`.
"""

from __future__ import annotations

import argparse
import typing
from pathlib import Path
from typing import Literal

from pydantic import Field
from pydantic_settings import BaseSettings, SettingsConfigDict

from .errors import MarketSpreadError

__all__ = ["ENV_PREFIX", "Settings", "KafkaSettings", "add_arguments", "from_args", "env_name"]

ENV_PREFIX = "MARKETSPREAD_"

RecordFormat = Literal["message", "framed"]


class Settings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix=ENV_PREFIX, frozen=True, extra="forbid")

    def to_env(self) -> dict[str, str]:
        """The environment that reproduces these settings in a child process or a pod."""
        env = {}
        for name, value in self.model_dump(mode="json").items():
            env[env_name(name)] = str(value).lower() if isinstance(value, bool) else str(value)
        return env

    def to_args(self) -> list[str]:
        args = []
        for name, value in self.model_dump(mode="json").items():
            flag = "--" + name.replace("_", "-")
            if isinstance(value, bool):
                args.append(flag if value else "--no-" + flag[2:])
            else:
                args += [flag, str(value)]
        return args


class KafkaSettings(Settings):
    """What every component needs to find its topics and agree on their record format."""

    bootstrap_servers: str = Field("127.0.0.1:9092", description="Kafka bootstrap servers, host:port[,host:port]")
    nbbo_topic: str = Field("nbbo", description="topic of the market-data (NBBO) stream")
    orders_topic: str = Field("orders", description="topic of the order stream")
    rejections_topic: str = Field("rejections", description="topic the job writes OrderResults to")
    dead_letter_topic: str = Field("dead-letters", description="topic for input records that are not fixish")
    record_format: RecordFormat = Field(
        "message",
        description="'message': one fixish message per Kafka record, keyed by symbol; 'framed': a batch of "
                    "4-byte-length-framed messages per record, keyed by shard",
    )
    shards: int = Field(
        1, ge=1,
        description="how many state shards the job groups symbols into (and, with record_format=framed, the "
                    "record keys); fixed for the life of a checkpoint. At least the job's shuffle partitions "
                    "(a shard is the unit of parallelism of the state stage), and no more: each shard also "
                    "splits every sender batch into one more, smaller Kafka record",
    )


    security_protocol: Literal["PLAINTEXT", "SSL"] = Field(
        "PLAINTEXT", description="PLAINTEXT, or SSL: TLS with a client certificate (the chart's kafka.security)")
    ssl_cafile: str = Field("", description="with SSL: PEM file of the CA that signed the brokers' certificates")
    ssl_certfile: str = Field("", description="with SSL: PEM file of this client's certificate")
    ssl_keyfile: str = Field("", description="with SSL: PEM file of this client's private key (PKCS#8, unencrypted)")

    def _tls_files(self) -> dict[str, Path]:
        files = {"ssl_cafile": self.ssl_cafile, "ssl_certfile": self.ssl_certfile, "ssl_keyfile": self.ssl_keyfile}
        missing = [name for name, path in files.items() if not path or not Path(path).is_file()]
        if missing:
            raise MarketSpreadError(f"security_protocol is SSL but {', '.join(missing)} "
                                    f"{'is' if len(missing) == 1 else 'are'} not set to a readable file")
        return {name: Path(path) for name, path in files.items()}

    def client_config(self) -> dict:
        """The security part of a kafka-python client's configuration."""
        if self.security_protocol == "PLAINTEXT":
            return {}
        files = self._tls_files()
        return {"security_protocol": "SSL", **{name: str(path) for name, path in files.items()}}

    def spark_kafka_options(self) -> dict[str, str]:
        """The same for Spark's Kafka source and sink (the Java client): PEM trust and key stores."""
        if self.security_protocol == "PLAINTEXT":
            return {}
        files = self._tls_files()
        return {
            "kafka.security.protocol": "SSL",
            "kafka.ssl.truststore.type": "PEM",
            "kafka.ssl.truststore.location": str(files["ssl_cafile"]),
            # The Java client takes a PEM key store as text; Strimzi's user.key is PKCS#8 already.
            "kafka.ssl.keystore.type": "PEM",
            "kafka.ssl.keystore.certificate.chain": files["ssl_certfile"].read_text(),
            "kafka.ssl.keystore.key": files["ssl_keyfile"].read_text(),
        }


def env_name(field: str) -> str:
    return ENV_PREFIX + field.upper()


def add_arguments(parser: argparse.ArgumentParser, settings_cls: type[Settings]) -> None:
    """A flag per settings field; an absent flag leaves the field to the environment or its default."""
    for name, info in settings_cls.model_fields.items():
        flag = "--" + name.replace("_", "-")
        default = info.get_default(call_default_factory=True)
        given = "required" if info.is_required() else f"default {default!r}"
        help_text = f"{info.description or ''} (env {env_name(name)}, {given})"
        kwargs: dict = {"dest": name, "default": argparse.SUPPRESS, "help": help_text}
        annotation = info.annotation
        if annotation is bool:
            kwargs["action"] = argparse.BooleanOptionalAction
        elif typing.get_origin(annotation) is Literal:
            kwargs["choices"] = typing.get_args(annotation)
        parser.add_argument(flag, **kwargs)


def from_args(settings_cls: type[Settings], namespace: argparse.Namespace, **overrides) -> Settings:
    given = {name: value for name, value in vars(namespace).items() if name in settings_cls.model_fields}
    given.update(overrides)
    return settings_cls(**given)
