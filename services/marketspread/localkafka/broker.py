"""A real Apache Kafka 4 broker on loopback, from the official jars, in KRaft combined mode.

The broker runs detached (it outlives the command that started it) with its data, config,
log and pid file in one run directory. Readiness is a real client request (describe cluster),
never a line grepped from the log.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import time
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

from .errors import BrokerError
from .settings import BrokerSettings

__all__ = ["LocalKafka", "BrokerStatus", "port_in_use"]

# Kafka's own command-line tools run these classes; the versions must match the data they format.
_STORAGE_TOOL = "kafka.tools.StorageTool"
_BROKER_MAIN = "kafka.Kafka"


def port_in_use(host: str, port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind((host, port))
        except OSError:
            return True
    return False


@dataclass(frozen=True)
class BrokerStatus:
    running: bool
    pid: int | None
    bootstrap_servers: str
    run_dir: Path

    def __str__(self) -> str:
        state = f"running (pid {self.pid})" if self.running else "stopped"
        return f"kafka {state} at {self.bootstrap_servers}, data in {self.run_dir}"


class LocalKafka:
    def __init__(self, settings: BrokerSettings | None = None):
        self.settings = settings or BrokerSettings()
        self.run_dir = self.settings.resolved_run_dir()
        self.jars_dir = self.settings.resolved_jars_dir()
        self.data_dir = self.run_dir / "data"
        self.config_file = self.run_dir / "server.properties"
        self.log_file = self.run_dir / "broker.log"
        self.pid_file = self.run_dir / "broker.pid"

    @property
    def bootstrap_servers(self) -> str:
        return self.settings.bootstrap_servers

    # -- lifecycle -------------------------------------------------------------------------

    def start(self) -> BrokerStatus:
        """Start the broker unless it already runs here; return once it answers requests."""
        if self._live_pid() is not None:
            self.wait_ready()
            return self.status()
        java = self._check_prerequisites()
        self.run_dir.mkdir(parents=True, exist_ok=True)
        self._write_config()
        if not (self.data_dir / "meta.properties").exists():
            self._format_storage(java)
        with open(self.log_file, "ab") as log:
            process = subprocess.Popen(
                [java, f"-Xmx{self.settings.heap}", f"-Xms{self.settings.heap}",
                 f"-Dlog4j2.configurationFile={self._log_config()}", "-cp", str(self.jars_dir / "*"),
                 _BROKER_MAIN, str(self.config_file)],
                stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                start_new_session=True,  # survives the command that started it, and its Ctrl-C
            )
        self.pid_file.write_text(str(process.pid))
        try:
            self.wait_ready(process)
        except BrokerError:
            self._kill(process.pid)
            raise
        return self.status()

    def stop(self, timeout: float = 30.0) -> bool:
        """Controlled shutdown (SIGTERM), SIGKILL after `timeout`; False if it was not running."""
        pid = self._live_pid()
        if pid is None:
            self.pid_file.unlink(missing_ok=True)
            return False
        os.kill(pid, signal.SIGTERM)
        if not _wait_exit(pid, timeout):
            self._kill(pid)
        self.pid_file.unlink(missing_ok=True)
        return True

    def kill(self) -> None:
        """SIGKILL, as a crash would: for fault-injection tests."""
        if (pid := self._live_pid()) is not None:
            self._kill(pid)
        self.pid_file.unlink(missing_ok=True)

    def status(self) -> BrokerStatus:
        return BrokerStatus(self._live_pid() is not None, self._live_pid(), self.bootstrap_servers, self.run_dir)

    def wait_ready(self, process: subprocess.Popen | None = None) -> None:
        from kafka.admin import KafkaAdminClient
        from kafka.errors import KafkaError

        deadline = time.monotonic() + self.settings.start_timeout_seconds
        last_error: Exception | None = None
        while time.monotonic() < deadline:
            if process is not None and process.poll() is not None:
                raise BrokerError(f"the broker exited with code {process.returncode} while starting; "
                                  f"last lines of {self.log_file}:\n{self._log_tail()}")
            if not _accepts_connections(self.settings.host, self.settings.port):
                # Until the port opens, a Kafka client would only log connection errors.
                time.sleep(0.2)
                continue
            try:
                admin = KafkaAdminClient(bootstrap_servers=self.bootstrap_servers, request_timeout_ms=5000,
                                         client_id="marketspread-readiness")
                try:
                    admin.describe_cluster()
                    return
                finally:
                    admin.close()
            except (KafkaError, OSError) as error:
                last_error = error
                time.sleep(0.3)
        raise BrokerError(f"the broker at {self.bootstrap_servers} did not answer within "
                          f"{self.settings.start_timeout_seconds:.0f} s ({last_error}); see {self.log_file}")

    # -- internals -------------------------------------------------------------------------

    def _check_prerequisites(self) -> str:
        java = shutil.which(self.settings.java)
        if java is None:
            raise BrokerError(f"'{self.settings.java}' not found: Kafka needs Java 17 or newer on the PATH")
        if not list(self.jars_dir.glob("kafka_2.13-*.jar")):
            raise BrokerError(f"no Kafka jars in {self.jars_dir}: run `make setup` first")
        if self.settings.ssl_port and not (Path(self.settings.ssl_keystore_file).is_file()
                                           and Path(self.settings.ssl_truststore_file).is_file()):
            raise BrokerError("ssl_port needs ssl_keystore_file and ssl_truststore_file (PEM files)")
        ports = [("client", self.settings.port), ("controller", self.settings.controller_port)]
        if self.settings.ssl_port:
            ports.append(("TLS", self.settings.ssl_port))
        for name, port in ports:
            if port_in_use(self.settings.host, port):
                flag = {"client": "port", "controller": "controller-port", "TLS": "ssl-port"}[name]
                raise BrokerError(f"the {name} port {self.settings.host}:{port} is taken by another process; "
                                  f"stop it or choose another port (--{flag})")
        return java

    def _log_config(self) -> Path:
        return Path(str(resources.files(__package__) / "log4j2.properties"))

    def _write_config(self) -> None:
        s = self.settings
        properties = {
            "process.roles": "broker,controller",
            "node.id": "1",
            "controller.quorum.bootstrap.servers": f"{s.host}:{s.controller_port}",
            "listeners": f"PLAINTEXT://{s.host}:{s.port},CONTROLLER://{s.host}:{s.controller_port}",
            "advertised.listeners": f"PLAINTEXT://{s.host}:{s.port}",
            "controller.listener.names": "CONTROLLER",
            "listener.security.protocol.map": "CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT,SSL:SSL",
            "log.dirs": str(self.data_dir.resolve()),
            # One node: every internal topic has one replica.
            "offsets.topic.replication.factor": "1",
            "offsets.topic.num.partitions": "4",
            "transaction.state.log.replication.factor": "1",
            "transaction.state.log.min.isr": "1",
            "share.coordinator.state.topic.replication.factor": "1",
            "share.coordinator.state.topic.min.isr": "1",
            "group.initial.rebalance.delay.ms": "0",
            # Topics are created by the project with explicit partition counts, never by accident.
            "auto.create.topics.enable": "false",
            "num.partitions": str(s.partitions),
        }
        if s.ssl_port:
            # A second listener for TLS clients, as Strimzi's `tls` listener with `authentication: tls`.
            properties["listeners"] += f",SSL://{s.host}:{s.ssl_port}"
            properties["advertised.listeners"] += f",SSL://{s.host}:{s.ssl_port}"
            properties.update({
                "ssl.keystore.type": "PEM", "ssl.keystore.location": str(Path(s.ssl_keystore_file).resolve()),
                "ssl.truststore.type": "PEM", "ssl.truststore.location": str(Path(s.ssl_truststore_file).resolve()),
                "ssl.client.auth": "required",
            })
        self.config_file.write_text("".join(f"{k}={v}\n" for k, v in properties.items()))

    def _format_storage(self, java: str) -> None:
        classpath = str(self.jars_dir / "*")
        log_config = f"-Dlog4j2.configurationFile={self._log_config()}"
        cluster_id = subprocess.run([java, log_config, "-cp", classpath, _STORAGE_TOOL, "random-uuid"],
                                    check=True, capture_output=True, text=True).stdout.strip().splitlines()[-1]
        result = subprocess.run(
            [java, log_config, "-cp", classpath, _STORAGE_TOOL, "format", "--standalone", "-t", cluster_id,
             "-c", str(self.config_file)], capture_output=True, text=True)
        if result.returncode != 0:
            raise BrokerError(f"formatting {self.data_dir} failed:\n{result.stdout}{result.stderr}")

    def _live_pid(self) -> int | None:
        try:
            pid = int(self.pid_file.read_text())
        except (FileNotFoundError, ValueError):
            return None
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return None
        # A recycled pid belongs to some other program: only a java process counts as ours.
        try:
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
        except OSError:
            return None
        return pid if _BROKER_MAIN.encode() in cmdline and str(self.config_file).encode() in cmdline else None

    def _kill(self, pid: int) -> None:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            return
        _wait_exit(pid, 10)

    def _log_tail(self, lines: int = 20) -> str:
        try:
            return "\n".join(self.log_file.read_text(errors="replace").splitlines()[-lines:])
        except FileNotFoundError:
            return "(no log)"


def _accepts_connections(host: str, port: int) -> bool:
    try:
        with socket.create_connection((host, port), timeout=1):
            return True
    except OSError:
        return False


def _wait_exit(pid: int, timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            finished, _ = os.waitpid(pid, os.WNOHANG)
            if finished == pid:
                return True
        except ChildProcessError:
            pass  # not our child: poll for its disappearance instead
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return True
        if _is_zombie(pid):
            return True
        time.sleep(0.1)
    return False


def _is_zombie(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().split(")")[-1].split()[0] == "Z"
    except (OSError, IndexError):
        return False
