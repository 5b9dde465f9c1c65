"""CPU seconds and resident memory of process trees, sampled with psutil.

A tree is a root process and all its descendants (the Spark driver's Python, its JVM and the
JVM's Python workers; a sender; the broker). CPU is the sum over every process ever seen in the
tree of its last observed user + system time, so a Python worker that exits keeps counting what
it used; RSS is the sum over the processes alive at a sample, and the peak is the highest sum
seen. PSS is summed the same way: it splits each shared page among the processes that map it, so
a JVM's forked Python workers and their daemon do not count their shared pages twice; it is what
"memory over time" uses (RSS where the kernel will not tell PSS). The kernel walks a process's
page tables to tell its PSS: read at every sample it took the harness from 3 % to 10 % of a core,
taken from the system under test, so PSS is read only for the trees tracked with `pss=True` (the
system under test), every `pss_every`-th sample, and held between. Several roots may share one
name (the senders of a step). A child a JVM is still spawning counts its CPU but not its memory
(see `spawned_by_jvm`).
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field

import psutil

__all__ = ["TreeSampler", "TreeUsage", "find_listener_pid", "mid_spawn", "spawned_by_jvm"]


def spawned_by_jvm(parent_name: str, parent_exe: str, exe: str) -> bool:
    """Whether a child of `parent_name` is a JVM's child caught before it has exec'd its program.

    Java starts programs (Hadoop's chmod, five times a second in the job) with vfork: until exec
    the child runs in the JVM's own address space and the kernel reports that whole space for
    it, so a sample that counted it would count the JVM twice (a CI run saw one at the JVM's full
    1,373 MiB). A JVM's child still running the JVM's executable is taken to be one; a JVM that
    started a second JVM on purpose would be missed, which nothing here does.
    """
    return parent_name == "java" and bool(exe) and exe == parent_exe


def mid_spawn(process: psutil.Process) -> bool:
    """`spawned_by_jvm` for a live process; False once it is gone (a spawn helper lives milliseconds)."""
    try:
        parent = process.parent()
        return parent is not None and spawned_by_jvm(parent.name(), parent.exe(), process.exe())
    except psutil.Error:
        return False


@dataclass
class TreeUsage:
    cpu_seconds: float = 0.0
    rss_bytes: int = 0
    processes: int = 0
    pss_bytes: int | None = None  # None: the tree was not tracked with pss=True


@dataclass
class _Tree:
    roots: list[tuple[psutil.Process, bool]] = field(default_factory=list)  # (root, with descendants)
    cpu_by_pid: dict[int, float] = field(default_factory=dict)
    peak_rss: int = 0
    pss: int | None = None  # the last PSS read, for trees tracked with pss=True


class TreeSampler:
    def __init__(self, pss_every: int = 1) -> None:
        self._trees: dict[str, _Tree] = {}
        self.pss_every = pss_every
        self._samples = 0

    def track(self, name: str, pid: int | None, recursive: bool = True, pss: bool = False) -> None:
        if pid is None:
            return
        try:
            process = psutil.Process(pid)
        except psutil.Error:
            return
        tree = self._trees.setdefault(name, _Tree())
        tree.roots.append((process, recursive))
        if pss and tree.pss is None:
            tree.pss = 0

    def names(self) -> list[str]:
        return list(self._trees)

    def sample(self) -> dict[str, TreeUsage]:
        usage = {}
        read_pss = self._samples % self.pss_every == 0
        self._samples += 1
        for name, tree in self._trees.items():
            rss = pss = alive = 0
            tree_pss = read_pss and tree.pss is not None
            for root, recursive in tree.roots:
                members = [root]
                if recursive:
                    try:
                        members += root.children(recursive=True)
                    except psutil.Error:
                        pass
                for process in members:
                    try:
                        with process.oneshot():
                            times = process.cpu_times()
                            memory = process.memory_info().rss
                    except psutil.Error:
                        continue
                    tree.cpu_by_pid[process.pid] = times.user + times.system
                    if mid_spawn(process):
                        continue
                    if tree_pss:
                        try:
                            pss += process.memory_full_info().pss
                        except psutil.Error:
                            pss += memory
                    rss += memory
                    alive += 1
            tree.peak_rss = max(tree.peak_rss, rss)
            if tree_pss:
                tree.pss = pss
            usage[name] = TreeUsage(sum(tree.cpu_by_pid.values()), rss, alive, tree.pss)
        return usage

    def peak_rss(self, name: str) -> int:
        return self._trees[name].peak_rss if name in self._trees else 0

    def reset_peaks(self) -> None:
        for tree in self._trees.values():
            tree.peak_rss = 0

    def forget(self, name: str) -> None:
        self._trees.pop(name, None)


def find_listener_pid(port: int) -> int | None:
    """The process listening on a local TCP port (a broker this bench did not start), if visible."""
    try:
        for connection in psutil.net_connections(kind="tcp"):
            if connection.status == psutil.CONN_LISTEN and connection.laddr and connection.laddr.port == port:
                return connection.pid
    except (psutil.Error, OSError):
        return None
    return None


def own_pid() -> int:
    return os.getpid()
