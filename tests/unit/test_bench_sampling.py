"""What the bench reads of a process tree: CPU that outlives exited children, RSS, PSS that counts shared pages
once, and a JVM's child caught mid-spawn counted as CPU only."""

from __future__ import annotations

import os
import subprocess
import sys
import time

import psutil

from marketspread.bench.sampling import TreeSampler, spawned_by_jvm


def test_a_forked_child_shares_its_parents_pages_so_the_trees_pss_is_below_its_rss():
    # The child maps the same interpreter and libraries as its parent: RSS counts those pages in
    # both, PSS splits them between the two, as it does for pyspark's daemon and its workers.
    child = subprocess.Popen([sys.executable, "-c", "import numpy, sys; sys.stdin.read()"], stdin=subprocess.PIPE)
    try:
        sampler = TreeSampler()
        sampler.track("tree", os.getpid(), pss=True)
        usage = sampler.sample()["tree"]
        assert usage.processes >= 2
        assert 0 < usage.pss_bytes < usage.rss_bytes
        assert sampler.peak_rss("tree") == usage.rss_bytes
    finally:
        child.communicate(b"")


def test_cpu_used_by_a_child_that_has_exited_still_counts():
    sampler = TreeSampler()
    sampler.track("tree", os.getpid())
    child = subprocess.Popen([sys.executable, "-c", "sum(range(30_000_000)); input()"], stdin=subprocess.PIPE)
    try:
        while True:  # until the child has done its sum
            seen = sampler.sample()["tree"].cpu_seconds
            if seen > 0.3 + sum(os.times()[:2]):
                break
            time.sleep(0.05)
    finally:
        child.communicate(b"\n")
    assert sampler.sample()["tree"].cpu_seconds >= seen


def test_pss_read_every_nth_sample_is_held_in_between():
    sampler = TreeSampler(pss_every=3)
    sampler.track("tree", os.getpid(), pss=True)
    first = sampler.sample()["tree"].pss_bytes
    ballast = bytearray(b"\x01") * (64 << 20)  # written, so resident: 64 MiB more
    held = [sampler.sample()["tree"].pss_bytes for _ in range(2)]
    fresh = sampler.sample()["tree"].pss_bytes
    assert held == [first, first]
    assert fresh >= first + (60 << 20)
    del ballast


def test_only_the_trees_tracked_for_it_have_their_pss_read():
    # The broker's JVM walks as long a page table as the job's: nobody uses its PSS, so it is not read.
    sampler = TreeSampler()
    sampler.track("system", os.getpid(), recursive=False, pss=True)
    sampler.track("broker", os.getpid(), recursive=False)
    usage = sampler.sample()
    assert usage["system"].pss_bytes > 0 and usage["broker"].pss_bytes is None


def test_a_jvm_child_not_yet_execd_is_the_jvm_itself_and_any_other_child_is_its_own_process():
    java = "/usr/lib/jvm/java-17-openjdk-amd64/bin/java"
    # vfork, before exec: the child still runs the JVM's image and reports the JVM's memory.
    assert spawned_by_jvm("java", java, java)
    # After exec it is the program it started; a Python worker forked by pyspark's daemon runs the
    # daemon's own interpreter, and is a process of its own all the same.
    assert not spawned_by_jvm("java", java, "/usr/bin/chmod")
    assert not spawned_by_jvm("python3", sys.executable, sys.executable)
    assert not spawned_by_jvm("java", java, "")  # exe unreadable: counted


JAVA_SPAWNER = """
public class Spawner {
    public static void main(String[] args) throws Exception {
        Process child = new ProcessBuilder("sleep", "60").start();
        System.out.println("started");
        System.out.flush();
        System.in.read();
        child.destroy();
    }
}
"""


def test_a_jvms_started_program_counts_in_the_trees_memory(tmp_path):
    source = tmp_path / "Spawner.java"
    source.write_text(JAVA_SPAWNER)
    jvm = subprocess.Popen(["java", str(source)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert jvm.stdout.readline().strip() == "started"
        sampler = TreeSampler()
        sampler.track("jvm", jvm.pid, pss=True)
        usage = sampler.sample()["jvm"]
        children = psutil.Process(jvm.pid).children()
        assert [c.name() for c in children] == ["sleep"]
        # `processes` counts those whose memory is summed: the JVM and the program it started.
        assert usage.processes == 2
    finally:
        jvm.communicate("\n", timeout=30)
