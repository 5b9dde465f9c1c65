#!/usr/bin/env python3
"""A real Kubernetes control plane on loopback, as plain processes, with KWOK's simulated nodes.

    python3 k8s/cluster/cluster.py up       # build once (cached), start, install nodes and CRDs
    python3 k8s/cluster/cluster.py down     # stop everything we started, drop the cluster's data
    python3 k8s/cluster/cluster.py status   # what runs, and where
    python3 k8s/cluster/cluster.py build [--cold]   # only the build; --cold measures it from empty caches

etcd, kube-apiserver, kube-controller-manager and kube-scheduler are the upstream programs;
`kwok` plays the kubelets: it keeps three fake nodes Ready and moves the scheduler's pods
through their lifecycle without running any container. All of them are one binary built from
k8s/cluster/build (versions in its go.mod), cached under ~/.cache/marketspread-cluster.

Only the standard library is used, so this runs before `make setup` and from any Python 3.11.
Settings come from the environment (MARKETSPREAD_CLUSTER_*), see `Settings`.
"""

from __future__ import annotations

import argparse
import base64
import contextlib
import dataclasses
import fcntl
import hashlib
import ipaddress
import json
import os
import re
import shutil
import signal
import socket
import ssl
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
BUILD_DIR = HERE / "build"
BINARY = "ms-kube"
# The programs inside the one binary, each reached through a symlink of its own name so that
# `ps` and the logs show which is which.
PROGRAMS = ("etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler", "kubectl", "kwok")
# Upstream's release builds use these tags: no test-only code, and no x/net/trace in gRPC,
# which lets the linker drop it.
BUILD_TAGS = "selinux,notest,grpcnotrace"

SERVICE_CIDR = "10.96.0.0/16"   # only ever data here: no kube-proxy, nothing routes to it
POD_CIDR = "10.244.0.0/16"      # likewise: kwok writes these into pod status, no pod listens
CONTEXT = "marketspread-local"

# The simulated nodes. Allocatable is capacity less what a kubelet would reserve (kube-reserved,
# system-reserved, eviction threshold). The pinned pool's kubelet (k8s/pinned-pool/) reserves
# both hardware threads of one core with `reservedSystemCPUs`, so 8 CPUs leave 6, an integer.
POOL_LABEL = "marketspread.io/pool"
NODES = (
    # name,           pool,      cpu, memory, allocatable cpu, allocatable memory, tainted
    ("kwok-general-0", "general", "4", "16Gi", "3800m", "15260Mi", False),
    ("kwok-pinned-0", "pinned", "8", "32Gi", "6", "30620Mi", True),
    ("kwok-pinned-1", "pinned", "8", "32Gi", "6", "30620Mi", True),
)


class ClusterError(Exception):
    """Something the person running this can act on; the message says what."""


# -- settings ------------------------------------------------------------------------------------

@dataclasses.dataclass(frozen=True)
class Settings:
    cluster_dir: Path
    cache_dir: Path
    crds_dir: Path
    etcd_port: int = 30379
    etcd_peer_port: int = 30380
    apiserver_port: int = 30443
    controller_manager_port: int = 30257
    scheduler_port: int = 30259
    kwok_port: int = 30247
    start_timeout: float = 120.0

    @classmethod
    def from_env(cls) -> Settings:
        env = os.environ
        local = Path(env.get("MARKETSPREAD_LOCAL_DIR", REPO / ".local"))
        fields = {
            "cluster_dir": Path(env.get("MARKETSPREAD_CLUSTER_DIR", local / "cluster")).resolve(),
            "cache_dir": Path(env.get("MARKETSPREAD_CLUSTER_CACHE",
                                      Path(env.get("XDG_CACHE_HOME", Path.home() / ".cache"))
                                      / "marketspread-cluster")).resolve(),
            "crds_dir": Path(env.get("MARKETSPREAD_CLUSTER_CRDS", REPO.parent / "shared" / "schemas" / "crds")),
        }
        for field in dataclasses.fields(cls):
            if field.name.endswith("_port"):
                name = "MARKETSPREAD_CLUSTER_" + field.name.upper()
                if name in env:
                    fields[field.name] = _port(name, env[name])
        if "MARKETSPREAD_CLUSTER_START_TIMEOUT" in env:
            fields["start_timeout"] = float(env["MARKETSPREAD_CLUSTER_START_TIMEOUT"])
        return cls(**fields)

    def ports(self) -> dict[str, int]:
        return {"etcd": self.etcd_port, "etcd peer": self.etcd_peer_port,
                "kube-apiserver": self.apiserver_port,
                "kube-controller-manager": self.controller_manager_port,
                "kube-scheduler": self.scheduler_port, "kwok": self.kwok_port}

    @property
    def kubeconfig(self) -> Path:
        return self.cluster_dir / "kubeconfig"

    @property
    def server(self) -> str:
        return f"https://127.0.0.1:{self.apiserver_port}"


def _port(name: str, value: str) -> int:
    try:
        port = int(value)
    except ValueError:
        raise ClusterError(f"{name}={value!r} is not a port number") from None
    if not 1024 <= port <= 65535:
        raise ClusterError(f"{name}={port} is outside 1024-65535")
    return port


# -- build -----------------------------------------------------------------------------------------

def module_versions() -> dict[str, str]:
    """The pinned upstream versions, read from go.mod so there is one place to change them."""
    text = (BUILD_DIR / "go.mod").read_text()
    wanted = {"kubernetes": "k8s.io/kubernetes", "etcd": "go.etcd.io/etcd/server/v3", "kwok": "sigs.k8s.io/kwok"}
    versions = {}
    for key, module in wanted.items():
        match = re.search(rf"^\s*{re.escape(module)} (v\S+)", text, re.MULTILINE)
        if not match:
            raise ClusterError(f"{module} is not required in {BUILD_DIR / 'go.mod'}")
        versions[key] = match.group(1)
    return versions


def _ldflags(kubernetes_version: str) -> str:
    major, minor = kubernetes_version.lstrip("v").split(".")[:2]
    # Without these the servers call themselves v0.0.0-master, which Helm's kubeVersion checks
    # and kubectl's version-skew warnings would take at their word.
    flags = ["-s", "-w"]
    for package in ("k8s.io/component-base/version", "k8s.io/client-go/pkg/version"):
        flags += [f"-X {package}.gitVersion={kubernetes_version}", f"-X {package}.gitMajor={major}",
                  f"-X {package}.gitMinor={minor}", f"-X {package}.gitTreeState=clean"]
    return " ".join(flags)


def build_key() -> str:
    versions = module_versions()
    go_version = subprocess.run(["go", "env", "GOVERSION"], capture_output=True, text=True, check=True).stdout.strip()
    digest = hashlib.sha256()
    for name in ("go.mod", "go.sum", "main.go"):
        digest.update((BUILD_DIR / name).read_bytes())
    digest.update(f"{BUILD_TAGS} {_ldflags(versions['kubernetes'])} {go_version}".encode())
    return (f"k8s-{versions['kubernetes']}_etcd-{versions['etcd']}_kwok-{versions['kwok']}_"
            f"{go_version}_{digest.hexdigest()[:12]}")


def build(settings: Settings, *, cold: bool = False) -> Path:
    """The binary for this go.mod, building it only when the cache has none.

    `cold` builds into a throwaway place with empty module and build caches, as on a fresh
    machine, and reports the wall time and the peak memory of the whole build's process tree.
    """
    if shutil.which("go") is None:
        raise ClusterError("Go is not on the PATH: the control plane is built from source with Go 1.26+")
    versions = module_versions()
    key = build_key()
    target = settings.cache_dir / key / BINARY
    if target.exists() and not cold:
        return target
    env = dict(os.environ, CGO_ENABLED="0")
    # go.sum is ours and complete: a build must never rewrite it or consult anything but it.
    env["GOFLAGS"] = " ".join(f for f in (env.get("GOFLAGS", ""), "-mod=readonly") if f)
    scratch = Path(tempfile.mkdtemp(prefix="ms-kube-build-"))
    if cold:
        env["GOCACHE"] = str(scratch / "gocache")
        env["GOMODCACHE"] = str(scratch / "gomodcache")
    output = scratch / BINARY
    command = ["go", "build", "-trimpath", "-tags", BUILD_TAGS, "-ldflags", _ldflags(versions["kubernetes"]),
               "-o", str(output), "."]
    print(f"building {BINARY} (Kubernetes {versions['kubernetes']}, etcd {versions['etcd']}, "
          f"kwok {versions['kwok']}); a cold build takes a while on 2 cores", file=sys.stderr)
    try:
        started = time.monotonic()
        returncode, peak = _run_measured(command, cwd=BUILD_DIR, env=env)
        elapsed = time.monotonic() - started
        if returncode != 0:
            raise ClusterError(f"`go build` in {BUILD_DIR} failed with exit code {returncode}")
        print(f"built {BINARY} in {elapsed:.0f} s, peak memory of the build {peak / 2**30:.2f} GiB "
              f"(sum of RSS over go and its compilers/linker), {output.stat().st_size / 2**20:.0f} MiB",
              file=sys.stderr)
        target.parent.mkdir(parents=True, exist_ok=True)
        staged = target.with_name(f".{BINARY}.{os.getpid()}")
        shutil.copy2(output, staged)
        os.replace(staged, target)  # two concurrent builds both end with a whole binary
        return target
    finally:
        if cold:  # the module cache is read-only on purpose; only `go clean` removes it politely
            subprocess.run(["go", "clean", "-modcache"], env=env, capture_output=True)
        shutil.rmtree(scratch, ignore_errors=True)


def _run_measured(command: list[str], *, cwd: Path, env: dict[str, str]) -> tuple[int, int]:
    process = subprocess.Popen(command, cwd=cwd, env=env)
    peak = 0
    while process.poll() is None:
        peak = max(peak, _tree_rss(process.pid))
        time.sleep(0.25)
    return process.returncode, peak


def _tree_rss(root: int) -> int:
    children: dict[int, list[int]] = {}
    rss: dict[int, int] = {}
    page = os.sysconf("SC_PAGE_SIZE")
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            stat = Path(f"/proc/{entry}/stat").read_text()
            statm = Path(f"/proc/{entry}/statm").read_text()
        except OSError:
            continue
        pid, ppid = int(entry), int(stat.rsplit(")", 1)[1].split()[1])
        children.setdefault(ppid, []).append(pid)
        rss[pid] = int(statm.split()[1]) * page
    total, stack = 0, [root]
    while stack:
        pid = stack.pop()
        total += rss.get(pid, 0)
        stack += children.get(pid, [])
    return total


def install_binaries(settings: Settings, binary: Path) -> Path:
    """Symlinks named after each program, in the cluster's bin/ (kubectl among them)."""
    bin_dir = settings.cluster_dir / "bin"
    bin_dir.mkdir(parents=True, exist_ok=True)
    for name in PROGRAMS:
        link = bin_dir / name
        if link.is_symlink() and Path(os.readlink(link)) == binary:
            continue
        staged = bin_dir / f".{name}.{os.getpid()}"
        staged.unlink(missing_ok=True)
        staged.symlink_to(binary)
        os.replace(staged, link)
    return bin_dir


# -- certificates and kubeconfigs ------------------------------------------------------------------

def make_pki(settings: Settings) -> Path:
    """A CA, the API server's serving certificate, one client certificate per identity, and the
    service-account signing key. Kept across restarts: a new CA would invalidate every
    kubeconfig handed out and every token already in etcd."""
    pki = settings.cluster_dir / "pki"
    if (pki / "complete").exists():
        return pki
    if shutil.which("openssl") is None:
        raise ClusterError("openssl is not on the PATH: it makes the cluster's certificates "
                           "(apt-get install openssl)")
    shutil.rmtree(pki, ignore_errors=True)
    pki.mkdir(parents=True)
    os.chmod(pki, 0o700)

    def openssl(*args: str) -> None:
        result = subprocess.run(["openssl", *args], cwd=pki, capture_output=True, text=True)
        if result.returncode != 0:
            raise ClusterError(f"openssl {' '.join(args)} failed: {result.stderr.strip()}")

    def key(name: str) -> None:
        openssl("genpkey", "-algorithm", "EC", "-pkeyopt", "ec_paramgen_curve:P-256", "-out", f"{name}.key")

    def authority(name: str, subject: str) -> None:
        key(name)
        openssl("req", "-x509", "-new", "-key", f"{name}.key", "-subj", subject, "-days", "3650",
                "-addext", "basicConstraints=critical,CA:TRUE", "-addext", "keyUsage=critical,keyCertSign,cRLSign",
                "-out", f"{name}.crt")

    authority("ca", "/CN=marketspread-local-ca")
    # As kubeadm: a second CA only for the API server's proxy identity towards aggregated API
    # servers. Without it every component logs, forever, that the request-header CA is missing.
    authority("front-proxy-ca", "/CN=marketspread-local-front-proxy-ca")

    def certificate(name: str, subject: str, usage: str, sans: str = "", ca: str = "ca") -> None:
        key(name)
        openssl("req", "-new", "-key", f"{name}.key", "-subj", subject, "-out", f"{name}.csr")
        extensions = ["basicConstraints=critical,CA:FALSE", "keyUsage=critical,digitalSignature",
                      f"extendedKeyUsage={usage}"]
        if sans:
            extensions.append(f"subjectAltName={sans}")
        (pki / f"{name}.ext").write_text("\n".join(extensions) + "\n")
        openssl("x509", "-req", "-in", f"{name}.csr", "-CA", f"{ca}.crt", "-CAkey", f"{ca}.key",
                "-set_serial", f"0x{os.urandom(16).hex()}", "-days", "825", "-extfile", f"{name}.ext",
                "-out", f"{name}.crt")
        (pki / f"{name}.csr").unlink()
        (pki / f"{name}.ext").unlink()

    # The first address of the service range is the `kubernetes` Service, which in-cluster
    # clients would dial; the names are what they would ask for.
    kubernetes_service_ip = next(ipaddress.ip_network(SERVICE_CIDR).hosts())
    certificate("apiserver", "/CN=kube-apiserver", "serverAuth",
                f"IP:127.0.0.1,DNS:localhost,IP:{kubernetes_service_ip},DNS:kubernetes,DNS:kubernetes.default,"
                "DNS:kubernetes.default.svc,DNS:kubernetes.default.svc.cluster.local")
    # system:masters bypasses RBAC: the person at the keyboard, and kwok, which writes the status
    # of every node and pod as the kubelets would. The two control-plane components get the
    # identities the API server's bootstrap RBAC policy already grants what they need.
    certificate("admin", "/O=system:masters/CN=marketspread-admin", "clientAuth")
    certificate("kwok", "/O=system:masters/CN=kwok-controller", "clientAuth")
    certificate("controller-manager", "/CN=system:kube-controller-manager", "clientAuth")
    certificate("scheduler", "/CN=system:kube-scheduler", "clientAuth")
    certificate("front-proxy-client", "/CN=front-proxy-client", "clientAuth", ca="front-proxy-ca")
    key("sa")
    openssl("pkey", "-in", "sa.key", "-pubout", "-out", "sa.pub")
    for path in pki.glob("*.key"):
        os.chmod(path, 0o600)
    (pki / "complete").touch()
    return pki


def write_kubeconfig(settings: Settings, pki: Path, identity: str, path: Path) -> Path:
    # JSON is YAML: every kubeconfig reader (kubectl, client-go, Helm, the Python client) takes it.
    def data(name: str) -> str:
        return base64.b64encode((pki / name).read_bytes()).decode()

    config = {
        "apiVersion": "v1", "kind": "Config", "preferences": {}, "current-context": CONTEXT,
        "clusters": [{"name": CONTEXT, "cluster": {"server": settings.server,
                                                   "certificate-authority-data": data("ca.crt")}}],
        "users": [{"name": identity, "user": {"client-certificate-data": data(f"{identity}.crt"),
                                              "client-key-data": data(f"{identity}.key")}}],
        "contexts": [{"name": CONTEXT, "context": {"cluster": CONTEXT, "user": identity,
                                                   "namespace": "default"}}],
    }
    staged = path.with_name(f".{path.name}.{os.getpid()}")
    staged.write_text(json.dumps(config, indent=2) + "\n")
    os.chmod(staged, 0o600)
    os.replace(staged, path)
    return path


# -- components ------------------------------------------------------------------------------------

@dataclasses.dataclass(frozen=True)
class Component:
    name: str
    argv: list[str]
    ready_url: str
    tls: str  # "none", "client" (our CA and the admin certificate) or "insecure" (self-signed)


def components(settings: Settings, bin_dir: Path, pki: Path) -> list[Component]:
    s, d = settings, settings.cluster_dir
    config = d / "config"
    config.mkdir(parents=True, exist_ok=True)

    def kubeconfig(identity: str) -> str:
        return str(write_kubeconfig(settings, pki, identity, config / f"{identity}.kubeconfig"))

    etcd = Component("etcd", [
        str(bin_dir / "etcd"), "--name=marketspread", f"--data-dir={d / 'etcd'}",
        f"--listen-client-urls=http://127.0.0.1:{s.etcd_port}",
        f"--advertise-client-urls=http://127.0.0.1:{s.etcd_port}",
        f"--listen-peer-urls=http://127.0.0.1:{s.etcd_peer_port}",
        f"--initial-advertise-peer-urls=http://127.0.0.1:{s.etcd_peer_port}",
        f"--initial-cluster=marketspread=http://127.0.0.1:{s.etcd_peer_port}",
        "--initial-cluster-state=new", "--log-level=warn",
        # The data is thrown away at `down`; fsync only slows every write on a shared disk.
        "--unsafe-no-fsync", "--quota-backend-bytes=2147483648",
    ], f"http://127.0.0.1:{s.etcd_port}/health", "none")

    apiserver = Component("kube-apiserver", [
        str(bin_dir / "kube-apiserver"),
        f"--etcd-servers=http://127.0.0.1:{s.etcd_port}",
        "--bind-address=127.0.0.1", f"--secure-port={s.apiserver_port}", "--advertise-address=127.0.0.1",
        f"--tls-cert-file={pki / 'apiserver.crt'}", f"--tls-private-key-file={pki / 'apiserver.key'}",
        f"--client-ca-file={pki / 'ca.crt'}",
        f"--requestheader-client-ca-file={pki / 'front-proxy-ca.crt'}",
        "--requestheader-allowed-names=front-proxy-client", "--requestheader-username-headers=X-Remote-User",
        "--requestheader-group-headers=X-Remote-Group", "--requestheader-extra-headers-prefix=X-Remote-Extra-",
        f"--proxy-client-cert-file={pki / 'front-proxy-client.crt'}",
        f"--proxy-client-key-file={pki / 'front-proxy-client.key'}",
        f"--service-account-key-file={pki / 'sa.pub'}", f"--service-account-signing-key-file={pki / 'sa.key'}",
        "--service-account-issuer=https://kubernetes.default.svc.cluster.local",
        f"--service-cluster-ip-range={SERVICE_CIDR}",
        "--authorization-mode=RBAC", "--allow-privileged=true", "--profiling=false",
        # Every connection the API server would open towards the cluster (webhooks, aggregated
        # APIs, logs/exec via a kubelet) goes to a socket that does not exist: the nodes and pods
        # are simulated, and their addresses must never see traffic from this machine.
        f"--egress-selector-config-file={config / 'egress-selector.json'}",
        # The `kubernetes` Service would point at the advertise address, and Endpoints may not
        # hold a loopback address.
        "--endpoint-reconciler-type=none",
    ], f"https://127.0.0.1:{s.apiserver_port}/readyz", "client")

    controller_manager = Component("kube-controller-manager", [
        str(bin_dir / "kube-controller-manager"),
        f"--kubeconfig={kubeconfig('controller-manager')}",
        f"--authentication-kubeconfig={config / 'controller-manager.kubeconfig'}",
        f"--authorization-kubeconfig={config / 'controller-manager.kubeconfig'}",
        "--bind-address=127.0.0.1", f"--secure-port={s.controller_manager_port}",
        f"--cert-dir={d / 'controller-manager'}",
        "--use-service-account-credentials=true",
        f"--service-account-private-key-file={pki / 'sa.key'}", f"--root-ca-file={pki / 'ca.crt'}",
        f"--cluster-signing-cert-file={pki / 'ca.crt'}", f"--cluster-signing-key-file={pki / 'ca.key'}",
        f"--service-cluster-ip-range={SERVICE_CIDR}",
        # One instance: electing a leader only delays a restart by the lease of the last one.
        "--leader-elect=false",
    ], f"https://127.0.0.1:{s.controller_manager_port}/healthz", "insecure")

    scheduler = Component("kube-scheduler", [
        str(bin_dir / "kube-scheduler"),
        f"--kubeconfig={kubeconfig('scheduler')}",
        f"--authentication-kubeconfig={config / 'scheduler.kubeconfig'}",
        f"--authorization-kubeconfig={config / 'scheduler.kubeconfig'}",
        "--bind-address=127.0.0.1", f"--secure-port={s.scheduler_port}",
        f"--cert-dir={d / 'scheduler'}", "--leader-elect=false",
    ], f"https://127.0.0.1:{s.scheduler_port}/healthz", "insecure")

    kwok = Component("kwok", [
        str(bin_dir / "kwok"), f"--kubeconfig={kubeconfig('kwok')}", f"--config={config / 'kwok-stages.yaml'}",
        # Only our nodes: anything else registered here is left alone.
        "--manage-all-nodes=false", "--manage-nodes-with-annotation-selector=kwok.x-k8s.io/node=fake",
        # A node's address is where the API server would reach its kubelet: keep it on loopback.
        "--node-ip=127.0.0.1", f"--cidr={POD_CIDR}",
        f"--server-address=127.0.0.1:{s.kwok_port}", "--node-lease-duration-seconds=40",
    ], f"http://127.0.0.1:{s.kwok_port}/healthz", "none")

    return [etcd, apiserver, controller_manager, scheduler, kwok]


def write_configs(settings: Settings, binary: Path) -> None:
    config = settings.cluster_dir / "config"
    config.mkdir(parents=True, exist_ok=True)
    (config / "egress-selector.json").write_text(json.dumps({
        "apiVersion": "apiserver.k8s.io/v1beta1", "kind": "EgressSelectorConfiguration",
        "egressSelections": [{"name": "cluster", "connection": {
            "proxyProtocol": "HTTPConnect",
            "transport": {"uds": {"udsName": str(settings.cluster_dir / "run" / "no-egress.sock")}}}}],
    }, indent=2) + "\n")
    # kwok's own stock stages (node init, lease heartbeat, pod ready/complete/delete), which it
    # embeds; the binary prints them so nothing of upstream's is copied into this repository.
    stages = subprocess.run([str(binary), "kwok-default-stages"], capture_output=True, text=True)
    if stages.returncode != 0 or "kind: Stage" not in stages.stdout:
        raise ClusterError(f"`{BINARY} kwok-default-stages` failed: {stages.stderr.strip()}")
    (config / "kwok-stages.yaml").write_text(stages.stdout)


# -- processes -------------------------------------------------------------------------------------

def _start_time(pid: int) -> int | None:
    """The kernel's start time of `pid`, which tells our process from a later one with its pid."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return None
    if fields[0] in ("Z", "X"):
        return None
    return int(fields[19])


class Processes:
    """The pids of what we started, each with its start time, in run/processes.json."""

    def __init__(self, settings: Settings):
        self.path = settings.cluster_dir / "run" / "processes.json"

    def load(self) -> dict[str, dict]:
        try:
            return json.loads(self.path.read_text())
        except (FileNotFoundError, ValueError):
            return {}

    def save(self, entries: dict[str, dict]) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        staged = self.path.with_name(f".processes.{os.getpid()}")
        staged.write_text(json.dumps(entries, indent=2) + "\n")
        os.replace(staged, self.path)

    def alive(self) -> dict[str, int]:
        return {name: entry["pid"] for name, entry in self.load().items()
                if _start_time(entry["pid"]) == entry["start_time"]}


def port_in_use(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind(("127.0.0.1", port))
        except OSError:
            return True
    return False


def _holder(port: int) -> str:
    if shutil.which("ss") is None:
        return ""
    result = subprocess.run(["ss", "-Hltnp", f"sport = :{port}"], capture_output=True, text=True)
    users = re.findall(r'\("([^"]+)",pid=(\d+)', result.stdout)
    return f" by {', '.join(f'{name} (pid {pid})' for name, pid in users)}" if users else ""


def check_ports(settings: Settings) -> None:
    ports = settings.ports()
    if len(set(ports.values())) != len(ports):
        raise ClusterError(f"two components were given the same port: {ports}")
    taken = [(name, port) for name, port in settings.ports().items() if port_in_use(port)]
    if taken:
        lines = [f"  {name}: 127.0.0.1:{port} is taken{_holder(port)}; choose another with "
                 f"MARKETSPREAD_CLUSTER_{_port_variable(name)}=<port>" for name, port in taken]
        raise ClusterError("cannot start the cluster, ports in use:\n" + "\n".join(lines))


def _port_variable(component: str) -> str:
    return {"etcd": "ETCD_PORT", "etcd peer": "ETCD_PEER_PORT", "kube-apiserver": "APISERVER_PORT",
            "kube-controller-manager": "CONTROLLER_MANAGER_PORT", "kube-scheduler": "SCHEDULER_PORT",
            "kwok": "KWOK_PORT"}[component]


def _ssl_context(tls: str, pki: Path) -> ssl.SSLContext | None:
    if tls == "none":
        return None
    if tls == "insecure":  # the component's own self-signed certificate; /healthz needs no identity
        return ssl._create_unverified_context()
    context = ssl.create_default_context(cafile=str(pki / "ca.crt"))
    context.load_cert_chain(str(pki / "admin.crt"), str(pki / "admin.key"))
    return context


def _healthy(component: Component, pki: Path) -> tuple[bool, str]:
    try:
        with urllib.request.urlopen(component.ready_url, timeout=3, context=_ssl_context(component.tls, pki)) as reply:
            body = reply.read().decode(errors="replace")
    except (urllib.error.URLError, OSError, ssl.SSLError) as error:
        return False, str(getattr(error, "reason", error))
    if component.name == "etcd":
        return json.loads(body).get("health") == "true", body
    return body.strip() == "ok", body


def _log_tail(path: Path, lines: int = 25) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except FileNotFoundError:
        return "(no log)"


def start(component: Component, settings: Settings, pki: Path, registry: Processes) -> None:
    logs = settings.cluster_dir / "logs"
    logs.mkdir(parents=True, exist_ok=True)
    log_path = logs / f"{component.name}.log"
    with open(log_path, "ab") as log:
        log.write(f"\n==== {time.strftime('%Y-%m-%dT%H:%M:%S')} {' '.join(component.argv)}\n".encode())
        log.flush()
        process = subprocess.Popen(component.argv, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                   cwd=settings.cluster_dir,
                                   start_new_session=True)  # outlives `up`, and its Ctrl-C
    entries = registry.load()
    entries[component.name] = {"pid": process.pid, "start_time": _start_time(process.pid)}
    registry.save(entries)
    deadline = time.monotonic() + settings.start_timeout
    detail = ""
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise ClusterError(f"{component.name} exited with code {process.returncode} while starting; "
                               f"last lines of {log_path}:\n{_log_tail(log_path)}")
        ok, detail = _healthy(component, pki)
        if ok:
            return
        time.sleep(0.2)
    raise ClusterError(f"{component.name} was not healthy at {component.ready_url} within "
                       f"{settings.start_timeout:.0f} s ({detail.strip()[:300]}); see {log_path}")


def _terminate(pid: int, start_time: int, timeout: float) -> None:
    # Each component leads its own process group (start_new_session), so the group is exactly it
    # and anything it spawned.
    if _start_time(pid) != start_time:
        return
    _signal(pid, signal.SIGTERM)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if _start_time(pid) != start_time:
            _reap(pid)
            return
        time.sleep(0.1)
    _signal(pid, signal.SIGKILL)
    while _start_time(pid) == start_time:
        time.sleep(0.05)
    _reap(pid)


def _signal(pid: int, signum: int) -> None:
    try:
        if os.getpgid(pid) == pid:
            os.killpg(pid, signum)
        else:  # a stray that is not a group leader: only itself
            os.kill(pid, signum)
    except ProcessLookupError:
        pass


def _reap(pid: int) -> None:
    try:  # only our own children (when up and down run in one process) need reaping
        os.waitpid(pid, os.WNOHANG)
    except ChildProcessError:
        pass


def stop_all(settings: Settings, timeout: float = 20.0) -> list[str]:
    registry = Processes(settings)
    entries = registry.load()
    stopped = []
    for name in reversed(PROGRAMS):  # kwok first, etcd last: nothing loses its store while running
        entry = entries.get(name)
        if entry and _start_time(entry["pid"]) == entry["start_time"]:
            _terminate(entry["pid"], entry["start_time"], timeout)
            stopped.append(name)
    for pid in _strays(settings):
        start_time = _start_time(pid)
        if start_time is not None:
            _terminate(pid, start_time, timeout)
            stopped.append(f"stray pid {pid}")
    registry.path.unlink(missing_ok=True)
    return stopped


def _strays(settings: Settings) -> list[int]:
    """Processes of this cluster that the registry lost (e.g. it was deleted): their command line
    runs a program from our bin/ directory."""
    bin_dir = str(settings.cluster_dir / "bin") + "/"
    strays = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) == os.getpid():
            continue
        try:
            argv0 = Path(f"/proc/{entry}/cmdline").read_bytes().split(b"\0")[0].decode(errors="replace")
        except OSError:
            continue
        if argv0.startswith(bin_dir) and Path(argv0).name != "kubectl":
            strays.append(int(entry))
    return strays


# -- cluster ---------------------------------------------------------------------------------------

def kubectl(settings: Settings, *args: str, stdin: str | None = None,
            check: bool = True) -> subprocess.CompletedProcess:
    result = subprocess.run([str(settings.cluster_dir / "bin" / "kubectl"), f"--kubeconfig={settings.kubeconfig}",
                             *args], input=stdin, capture_output=True, text=True)
    if check and result.returncode != 0:
        raise ClusterError(f"kubectl {' '.join(args)} failed: {result.stderr.strip() or result.stdout.strip()}")
    return result


def node_manifests() -> list[dict]:
    kubelet_version = module_versions()["kubernetes"]
    nodes = []
    for name, pool, cpu, memory, allocatable_cpu, allocatable_memory, tainted in NODES:
        nodes.append({
            "apiVersion": "v1", "kind": "Node",
            "metadata": {
                "name": name,
                # kwok manages exactly the nodes that carry this annotation.
                "annotations": {"kwok.x-k8s.io/node": "fake", "node.alpha.kubernetes.io/ttl": "0"},
                "labels": {
                    "kubernetes.io/arch": "amd64", "kubernetes.io/os": "linux", "kubernetes.io/hostname": name,
                    "node.kubernetes.io/instance-type": f"{pool}-{cpu}cpu-{memory.lower()}",
                    "type": "kwok", POOL_LABEL: pool,
                },
            },
            "spec": {"taints": [{"key": POOL_LABEL, "value": pool, "effect": "NoSchedule"}] if tainted else []},
            "status": node_status(cpu, memory, allocatable_cpu, allocatable_memory, kubelet_version),
        })
    return nodes


def node_status(cpu: str, memory: str, allocatable_cpu: str, allocatable_memory: str, kubelet_version: str) -> dict:
    resources = {"ephemeral-storage": "100Gi", "hugepages-1Gi": "0", "hugepages-2Mi": "0", "pods": "110"}
    return {
        "capacity": {**resources, "cpu": cpu, "memory": memory},
        "allocatable": {**resources, "cpu": allocatable_cpu, "memory": allocatable_memory,
                        "ephemeral-storage": "95Gi"},
        # What a kubelet of the control plane's version would report; the runtime says who
        # really answers for the node.
        "nodeInfo": {"architecture": "amd64", "operatingSystem": "linux", "kubeletVersion": kubelet_version,
                     "containerRuntimeVersion": f"kwok://{module_versions()['kwok']}",
                     "osImage": "kwok simulated node", "kernelVersion": "kwok",
                     # Required by the schema; a kubelet reads them from the machine.
                     "machineID": "", "systemUUID": "", "bootID": "", "kubeProxyVersion": ""},
    }


def install_nodes(settings: Settings) -> None:
    manifests = node_manifests()
    kubectl(settings, "apply", "--server-side", "--force-conflicts", "--field-manager=marketspread-cluster",
            "-f", "-", stdin=json.dumps({"apiVersion": "v1", "kind": "List", "items": manifests}))
    # Server-side apply leaves a Node's status alone, so a node that already existed would keep
    # whatever capacity it had: set it through the status subresource, as a kubelet does.
    for manifest in manifests:
        kubectl(settings, "patch", "node", manifest["metadata"]["name"], "--subresource=status", "--type=merge",
                "-p", json.dumps({"status": manifest["status"]}))


def install_crds(settings: Settings) -> int:
    if not settings.crds_dir.is_dir():
        raise ClusterError(f"no CRDs at {settings.crds_dir}: set MARKETSPREAD_CLUSTER_CRDS to the folder "
                           f"holding strimzi/, spark-operator/ and prometheus-operator/")
    files = sorted(settings.crds_dir.rglob("*.yaml"))
    # Server-side: the Spark operator's CRDs are larger than the 256 KiB annotation that a
    # client-side apply would store.
    args = ["apply", "--server-side", "--force-conflicts", "--field-manager=marketspread-cluster", "-o", "name"]
    for path in files:
        args += ["-f", str(path)]
    names = kubectl(settings, *args).stdout.split()
    wait_until(f"{len(names)} CRDs to be established", lambda: _established(settings, names), settings.start_timeout)
    return len(names)


def _established(settings: Settings, names: list[str]) -> bool:
    # `kubectl wait` fails outright on a CRD whose status has no conditions yet.
    reply = json.loads(kubectl(settings, "get", *names, "-o", "json").stdout)
    return all(any(c["type"] == "Established" and c["status"] == "True" for c in crd.get("status", {}).get(
        "conditions", [])) for crd in reply["items"]) and len(reply["items"]) == len(names)


def _drop_node_leases(settings: Settings) -> None:
    # A kwok that starts takes a new random identity and will not renew leases that its
    # predecessor held until they expire (40 s), by when the node controller has marked the
    # nodes NotReady. The predecessor is gone (we stopped it), so its leases can go too.
    kubectl(settings, "delete", "lease", "--namespace=kube-node-lease", "--ignore-not-found", "--wait=false",
            *(name for name, *_ in NODES))


def wait_until(what: str, condition, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return
        time.sleep(0.25)
    raise ClusterError(f"timed out after {timeout:.0f} s waiting for {what}")


def _nodes_ready(settings: Settings) -> bool:
    reply = json.loads(kubectl(settings, "get", "nodes", "-o", "json").stdout)
    ready = {node["metadata"]["name"] for node in reply["items"]
             if any(c["type"] == "Ready" and c["status"] == "True" for c in node["status"].get("conditions", []))}
    return ready >= {name for name, *_ in NODES}


def up(settings: Settings) -> None:
    started = time.monotonic()
    binary = build(settings)
    build_seconds = time.monotonic() - started
    bin_dir = install_binaries(settings, binary)
    pki = make_pki(settings)
    registry = Processes(settings)
    wanted = components(settings, bin_dir, pki)  # also (re)writes the component kubeconfigs
    write_kubeconfig(settings, pki, "admin", settings.kubeconfig)
    alive = registry.alive()
    healthy = len(alive) == len(wanted) and all(_healthy(c, pki)[0] for c in wanted)
    if healthy:
        print("the cluster is already up", file=sys.stderr)
    else:
        if alive or _strays(settings):
            print(f"the cluster is partly up ({', '.join(sorted(alive)) or 'untracked processes'}): restarting it",
                  file=sys.stderr)
            stop_all(settings)
        check_ports(settings)
        write_configs(settings, binary)
    try:
        for component in [] if healthy else wanted:
            step = time.monotonic()
            if component.name == "kwok":
                _drop_node_leases(settings)
            start(component, settings, pki, registry)
            print(f"  {component.name} up in {time.monotonic() - step:.1f} s", file=sys.stderr)
        step = time.monotonic()
        install_nodes(settings)
        wait_until(f"{len(NODES)} Ready nodes", lambda: _nodes_ready(settings), settings.start_timeout)
        print(f"  {len(NODES)} kwok nodes Ready in {time.monotonic() - step:.1f} s", file=sys.stderr)
        step = time.monotonic()
        count = install_crds(settings)
        print(f"  {count} CRDs established in {time.monotonic() - step:.1f} s", file=sys.stderr)
        # Pods are refused until the namespace's default ServiceAccount exists: a test that runs
        # right after `up` must not race the controller-manager for it.
        wait_until("the default ServiceAccount",
                   lambda: kubectl(settings, "get", "serviceaccount", "default", check=False).returncode == 0,
                   settings.start_timeout)
    except BaseException:
        if not healthy:
            stop_all(settings)  # never leave half a cluster running behind an error (or a Ctrl-C)
        raise
    built = f" ({build_seconds:.0f} s of it building)" if build_seconds > 5 else ""
    print(f"cluster up in {time.monotonic() - started:.1f} s{built}; logs in {settings.cluster_dir / 'logs'}",
          file=sys.stderr)
    print(f"export KUBECONFIG={settings.kubeconfig}")
    print(f"export PATH={bin_dir}:$PATH   # kubectl {module_versions()['kubernetes']}")


def down(settings: Settings) -> None:
    stopped = stop_all(settings)
    print(f"stopped {', '.join(stopped)}" if stopped else "nothing was running", file=sys.stderr)
    # Everything but the logs (for a post-mortem) and bin/ (links into the build cache) goes:
    # the next `up` starts from an empty etcd with fresh certificates.
    for name in ("etcd", "pki", "config", "run", "controller-manager", "scheduler", "kubeconfig"):
        path = settings.cluster_dir / name
        if path.is_dir():
            shutil.rmtree(path)
        else:
            path.unlink(missing_ok=True)


def status(settings: Settings, as_json: bool) -> int:
    alive = Processes(settings).alive()
    pki = settings.cluster_dir / "pki"
    report = {"up": False, "kubeconfig": str(settings.kubeconfig), "server": settings.server, "components": {}}
    if (pki / "complete").exists():
        for component in components_for_status(settings):
            ok = component.name in alive and _healthy(component, pki)[0]
            report["components"][component.name] = {"pid": alive.get(component.name), "healthy": ok}
        report["up"] = bool(report["components"]) and all(c["healthy"] for c in report["components"].values())
    if as_json:
        print(json.dumps(report, indent=2))
    else:
        for name, state in report["components"].items():
            print(f"{name:24} {'healthy' if state['healthy'] else 'DOWN':8} pid {state['pid']}")
        print(f"cluster {'up' if report['up'] else 'down'}; KUBECONFIG={settings.kubeconfig}")
    return 0 if report["up"] else 1


def components_for_status(settings: Settings) -> list[Component]:
    # Only names, URLs and TLS modes are needed: build nothing, write nothing.
    s = settings
    return [
        Component("etcd", [], f"http://127.0.0.1:{s.etcd_port}/health", "none"),
        Component("kube-apiserver", [], f"https://127.0.0.1:{s.apiserver_port}/readyz", "client"),
        Component("kube-controller-manager", [], f"https://127.0.0.1:{s.controller_manager_port}/healthz", "insecure"),
        Component("kube-scheduler", [], f"https://127.0.0.1:{s.scheduler_port}/healthz", "insecure"),
        Component("kwok", [], f"http://127.0.0.1:{s.kwok_port}/healthz", "none"),
    ]


@contextlib.contextmanager
def exclusive(settings: Settings):
    """One `up` or `down` at a time per cluster directory: two at once would race for ports and pids."""
    settings.cluster_dir.mkdir(parents=True, exist_ok=True)
    with open(settings.cluster_dir / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        yield


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    commands = parser.add_subparsers(dest="command", required=True)
    commands.add_parser("up", help="build if needed, start the cluster, install nodes and CRDs")
    commands.add_parser("down", help="stop the cluster and delete its data (logs are kept)")
    status_parser = commands.add_parser("status", help="exit 0 when every component is healthy")
    status_parser.add_argument("--json", action="store_true")
    build_parser = commands.add_parser("build", help="build the binary into the cache")
    build_parser.add_argument("--cold", action="store_true",
                              help="build from empty Go module and build caches and report time and peak memory")
    args = parser.parse_args(argv)
    try:
        settings = Settings.from_env()
        if args.command == "up":
            with exclusive(settings):
                up(settings)
        elif args.command == "down":
            with exclusive(settings):
                down(settings)
        elif args.command == "status":
            return status(settings, args.json)
        elif args.command == "build":
            print(build(settings, cold=args.cold))
    except ClusterError as error:
        print(f"cluster {args.command}: {error}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
