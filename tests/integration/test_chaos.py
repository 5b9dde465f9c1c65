"""`marketspread chaos`: a real fault mid-stream, and still nothing lost and nothing invented.

Each test runs one scenario through the command line, exactly as a user would: the scenario
starts its own Kafka broker, the Spark job, the receiver and two concurrent senders as real
processes, injects its fault for real (SIGKILL of a whole process tree, a controlled stop and a
start of the broker) while the senders run, recovers, and writes summary.json. The tests read
that summary and the logs, and check that the fault really happened (the killed and the
restarted processes differ, the restarted job resumed at the batch after the last one its
checkpoint had committed, the restarted receiver resumed from its commit point) and that, after
dedupe by order id, the received rejections equal the reference model's: zero missing, zero
unexpected, and every message sent is on the input topics exactly once.

The streams are 30,000 messages each at 2,000 msgs/s (15 s), so that the fault, injected once
30% of each stream is acknowledged and the job is processing orders, lands mid-stream however
slow the machine is.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from marketspread.cli import main

pytestmark = [pytest.mark.kafka, pytest.mark.spark, pytest.mark.slow, pytest.mark.timeout(900)]

STREAM = 30_000


def chaos(tmp_path: Path, scenario: str, *extra: str) -> tuple[int, dict]:
    out = tmp_path / "chaos"
    code = main(["chaos", "--scenario", scenario, "--out", str(out), "--messages", str(STREAM), "--rate", "2000",
                 "--reject-ratio", "0.01", "--seed", "5", "--fault-at", "0.3", "--timeout-seconds", "600", *extra])
    return code, json.loads((out / scenario / "summary.json").read_text())


def assert_exact(summary: dict) -> None:
    """Wallaroo's validator after dedupe by order id, and the inputs on their topics exactly once."""
    assert summary["error"] is None
    assert summary["missing"] == 0 and summary["unexpected"] == 0
    assert summary["received"] == summary["rejections_expected"] > 100
    assert summary["messages_sent"] == {"nbbo": 350 + STREAM, "orders": STREAM}
    assert summary["messages_on_topics"] == summary["messages_sent"]
    assert summary["repeated_order_ids_on_topics"] == 0
    assert summary["dead_letters"] == 0
    assert summary["correct"] and summary["passed"]


def test_a_job_killed_mid_stream_resumes_from_its_checkpoint_and_loses_nothing(tmp_path, wallaroo_data):
    code, summary = chaos(tmp_path, "job-kill")

    assert code == 0
    assert_exact(summary)
    [fault] = summary["faults_injected"]  # and no other death: the restarted job ran to the end
    details = fault["details"]
    assert fault["injected"] and fault["what"].startswith("SIGKILL of the Spark job")
    assert 0 < fault["when"]["stream_seconds"] < 15  # mid-stream
    assert details["killed_processes"] >= 3  # driver, JVM, Python workers
    killed, restarted = summary["job_runs"]
    assert killed["pid"] == details["killed_pid"] != details["restarted_pid"] == restarted["pid"]
    assert killed["ended"] == "killed by SIGKILL" and restarted["ended"] == "stopped"
    # The same query, resumed from its checkpoint: the first batch after the restart is the one after the last
    # batch the checkpoint had committed (a batch planned but not committed is re-run with the same offsets).
    assert killed["query_id"] == restarted["query_id"] is not None
    committed = details["last_committed_batch_at_kill"]
    assert killed["last_batch"] <= committed <= details["last_planned_batch_at_kill"]
    assert restarted["first_batch"] == details["first_batch_after_restart"] == committed + 1
    assert restarted["batches"] >= 1
    log = (tmp_path / "chaos" / "job-kill" / "logs" / "job.log").read_text()
    assert log.count(f"query {killed['query_id']} started") == 2
    assert f"batch {committed + 1}: " in log.split(f"query {killed['query_id']} started")[2]


def test_a_receiver_killed_mid_stream_resumes_from_its_commit_point_without_duplicates(tmp_path, wallaroo_data):
    code, summary = chaos(tmp_path, "receiver-kill")

    assert code == 0
    assert_exact(summary)
    [fault] = summary["faults_injected"]
    details = fault["details"]
    assert fault["injected"] and fault["what"] == "SIGKILL of the receiver mid-stream"
    assert 0 < fault["when"]["stream_seconds"] < 15
    killed, restarted = summary["receiver_runs"]
    assert killed["pid"] == details["killed_pid"] != details["restarted_pid"] == restarted["pid"]
    assert killed["exit_code"] == -9 and restarted["exit_code"] == 0
    assert details["group_id"] == "marketspread-chaos-receiver-kill"
    # It had results when it died; the restart read back exactly those up to its commit point (one OrderResult
    # per record in `message` format), and the results the job wrote meanwhile were waiting for it in Kafka.
    assert details["results_received_at_kill"] > 0
    assert details["resumed_with_results"] == details["commit_point_offsets"]["rejections"] > 0
    assert details["resumed_with_results"] <= details["results_received_at_kill"]
    assert details["result_records_written_while_down"] > 0
    # Files cut back to the commit point and resumed from its offsets: no OrderResult written twice.
    assert summary["duplicates"] == 0 and summary["received_with_duplicates"] == summary["received"]
    log = (tmp_path / "chaos" / "receiver-kill" / "logs" / "receiver.log").read_text()
    assert f"resuming from the last commit point: {details['resumed_with_results']} OrderResults" in log
    assert [run["ended"] for run in summary["job_runs"]] == ["stopped"]


def test_a_broker_restarted_while_the_senders_produce_loses_and_duplicates_nothing(tmp_path, wallaroo_data):
    code, summary = chaos(tmp_path, "broker-restart")

    assert code == 0
    assert_exact(summary)  # every message on its topic exactly once: the producers retried idempotently
    injected = [f for f in summary["faults_injected"] if f["injected"]]
    [fault] = injected
    details = fault["details"]
    assert fault["what"].startswith("controlled stop (SIGTERM) and start of the Kafka broker")
    assert details["broker_pid_before"] != details["broker_pid_after"]
    assert 0 < details["stream_messages_acknowledged_at_stop"] < 2 * STREAM
    before, after = details["input_end_offsets_before"], details["input_end_offsets_after"]
    assert all(after[topic] >= before[topic] > 0 for topic in ("nbbo", "orders"))  # the data survived the restart
    # If the Spark query died with the broker, the job was restarted from its checkpoint and that is on record.
    for consequence in summary["faults_injected"]:
        if not consequence["injected"]:
            assert consequence["details"]["service"] == "job"
            assert consequence["details"]["restarted_pid"] != consequence["details"]["failed_pid"]
    assert len(summary["job_runs"]) == 1 + len(summary["faults_injected"]) - 1
    for sender in ("sender-nbbo-nbbo", "sender-orders-orders"):
        log = (tmp_path / "chaos" / "broker-restart" / "logs" / f"{sender}.log").read_text()
        assert f"sent {STREAM:,} " in log and "FAILED" not in log


def test_a_crash_no_scenario_planned_is_recovered_by_the_supervisor_and_put_on_record(tmp_path, wallaroo_data):
    """The job's JVM alone is killed, as the kernel's OOM killer would kill the biggest process: nothing in the
    scenario restarts the job; its driver finds its query gone and exits on its own, and the supervisor restarts
    it from its checkpoint and records that death as a fault of its own, next to the one injected."""
    from marketspread.chaos.runner import ChaosInputs, ScenarioRun
    from marketspread.chaos.scenarios import Fault, checkpoint_batches
    from marketspread.chaos.settings import ChaosSettings

    data = tmp_path / "data"
    assert main(["generate", "--symbols", "350", "--nbbo", str(STREAM), "--orders", str(STREAM), "--seed", "6",
                 "--reject-ratio", "0.01", "--out", str(data)]) == 0
    settings = ChaosSettings(scenario="job-kill", out=str(tmp_path / "chaos"), rate=2000, fault_at=0.3,
                             timeout_seconds=600)
    inputs = ChaosInputs.load(data / "initial-nbbo.msg", data / "nbbo.msg", data / "orders.msg", settings.batch_size)
    seen = {}

    def kill_the_jvm(run: ScenarioRun) -> None:
        run.wait_fault_point()
        job = run.stack.service("job")
        [jvm] = [p for p in job.tree() if p.name() == "java"]
        seen["driver"], seen["committed"] = job.pid, checkpoint_batches(run.checkpoint)[1]
        when = run.now()
        jvm.kill()
        run.record(Fault(what=f"SIGKILL of the job's JVM alone (pid {jvm.pid})", when=when,
                         recovery="none by the scenario", details={"service": "jvm", "killed_pid": jvm.pid}))

    summary = ScenarioRun(settings, "jvm-kill", inputs, tmp_path / "chaos" / "jvm-kill", fault=kill_the_jvm).execute()

    assert_exact(summary)
    injected, consequence = summary["faults_injected"]
    assert injected["injected"] and not consequence["injected"]
    details = consequence["details"]
    assert consequence["what"].startswith(f"the job exited on its own with code {details['exit_code']}")
    assert details["service"] == "job" and details["exit_code"] != 0 and details["after"] == injected["what"]
    assert details["failed_pid"] == seen["driver"] != details["restarted_pid"]
    assert consequence["when"]["stream_seconds"] >= injected["when"]["stream_seconds"]
    crashed, restarted = summary["job_runs"]
    assert crashed["pid"] == seen["driver"] and crashed["ended"] == f"exit code {details['exit_code']}"
    assert restarted["pid"] == details["restarted_pid"] and restarted["query_id"] == crashed["query_id"]
    assert restarted["first_batch"] == details["first_batch_after_restart"] == seen["committed"] + 1
