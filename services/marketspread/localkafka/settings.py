"""Settings of the local single-node Kafka (broker and KRaft controller in one JVM)."""

from __future__ import annotations

from pathlib import Path

from pydantic import Field

from ..paths import local_dir
from ..settings import Settings

__all__ = ["BrokerSettings"]


class BrokerSettings(Settings):
    host: str = Field("127.0.0.1", description="loopback address the broker listens on")
    port: int = Field(9092, ge=1, le=65535, description="client (PLAINTEXT) port")
    controller_port: int = Field(9093, ge=1, le=65535, description="KRaft controller port")
    run_dir: str = Field("", description="broker data, config, log and pid; empty: $MARKETSPREAD_LOCAL_DIR/run/kafka")
    jars_dir: str = Field("", description="broker classpath from `make setup`; empty: $MARKETSPREAD_LOCAL_DIR/jars/kafka")
    java: str = Field("java", description="java executable (17+)")
    heap: str = Field("1g", description="broker JVM heap (-Xmx and -Xms)")
    start_timeout_seconds: float = Field(90, gt=0, description="how long to wait for the broker to answer")
    partitions: int = Field(2, ge=1, description="partitions of each topic `kafka topics` creates")
    ssl_port: int = Field(0, ge=0, le=65535, description="also listen for TLS clients here (client certificates "
                                                         "required); 0: no TLS listener")
    ssl_keystore_file: str = Field("", description="with ssl_port: PEM file with the broker's key and certificate")
    ssl_truststore_file: str = Field("", description="with ssl_port: PEM file of the CA that signs client certificates")

    @property
    def bootstrap_servers(self) -> str:
        return f"{self.host}:{self.port}"

    def resolved_run_dir(self) -> Path:
        return Path(self.run_dir) if self.run_dir else local_dir() / "run" / "kafka"

    def resolved_jars_dir(self) -> Path:
        return Path(self.jars_dir) if self.jars_dir else local_dir() / "jars" / "kafka"
