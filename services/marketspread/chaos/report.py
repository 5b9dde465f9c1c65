"""The readable report of a chaos scenario (or of all three)."""

from __future__ import annotations

__all__ = ["render"]


def _when(fault: dict) -> str:
    seconds = fault["when"].get("stream_seconds")
    return f"{seconds:+7.1f} s" if seconds is not None else "        "


def _fault_lines(fault: dict) -> list[str]:
    d = fault["details"]
    kind = "fault" if fault["injected"] else "consequence"
    lines = [f"  {kind:<12} {_when(fault)}  {fault['what']}"]
    facts = []
    if "killed_pid" in d:
        facts.append(f"killed pid {d['killed_pid']}" + (f" ({d['killed_processes']} processes)"
                                                       if d.get("killed_processes") else ""))
    if "failed_pid" in d:
        facts.append(f"pid {d['failed_pid']} exited with code {d['exit_code']}")
    if d.get("last_committed_batch_at_kill") is not None:
        facts.append(f"batch {d['last_committed_batch_at_kill']} committed, batch {d['last_planned_batch_at_kill']} "
                     "planned at the kill")
    if "commit_point_offsets" in d:
        point = ", ".join(f"{topic} {offset:,}" for topic, offset in sorted(d["commit_point_offsets"].items()))
        facts.append(f"{d['results_received_at_kill']:,} results received, commit point at offsets: {point or 'none'}")
    if "broker_pid_before" in d:
        down = f", kept down {d['kept_down_seconds']:g} s" if d.get("kept_down_seconds") else ""
        facts.append(f"broker pid {d['broker_pid_before']} -> {d['broker_pid_after']}, stop {d['stop_seconds']} s"
                     f"{down}, start {d['start_seconds']} s, {d['stream_messages_acknowledged_at_stop']:,} stream "
                     "messages acknowledged at the stop")
    if facts:
        lines.append(" " * 24 + "; ".join(facts))
    recovered = [fault["recovery"]]
    if d.get("restarted_pid"):
        recovered.append(f"new pid {d['restarted_pid']}")
    if d.get("first_batch_after_restart") is not None:
        recovered.append(f"resumed at batch {d['first_batch_after_restart']}")
    if d.get("resumed_with_results") is not None:
        recovered.append(f"resumed with {d['resumed_with_results']:,} results from its files, "
                         f"{d['result_records_written_while_down']:,} result records waiting")
    lines.append(" " * 24 + "recovery: " + "; ".join(recovered))
    return lines


def render_scenario(s: dict) -> str:
    lines = [f"Chaos scenario {s['scenario']}: {s['record_format']} records, {s['partitions']} partitions, "
             f"{s['rate']:,.0f} msgs/s per stream"]
    for fault in s["faults_injected"]:
        lines += _fault_lines(fault)
    if not s["faults_injected"]:
        lines.append("  fault        NONE INJECTED")
    on_topics = s["messages_on_topics"]
    sent = ", ".join(f"{topic} {n:,} (on the topic " + (f"{on_topics[topic]:,})" if topic in on_topics else
                                                         "not read back)")
                     for topic, n in s["messages_sent"].items())
    repeated = s["repeated_order_ids_on_topics"]
    lines.append(f"  sent         {sent}; "
                 + ("order ids repeated on the topic: not read back" if repeated is None else
                    f"order ids repeated on the topic: {repeated:,}"))
    lines.append(f"  rejections   expected {s['rejections_expected']:,}, received {s['received']:,} after dedupe by "
                 f"order id ({s['received_with_duplicates']:,} with {s['duplicates']:,} duplicates)")
    lines.append(f"  correctness  missing {s['missing']:,}, unexpected {s['unexpected']:,}, quote mismatches "
                 f"{s['quote_mismatches']:,} (not an error when concurrent), dead letters {s['dead_letters']:,}")
    runs = "; ".join(
        f"pid {r['pid']} batches {r['first_batch']}-{r['last_batch']}, {r['ended']}" if r["batches"] else
        f"pid {r['pid']} no batch, {r['ended']}" for r in s["job_runs"])
    lines.append(f"  job runs     {runs or 'none'}")
    lines.append(f"  wall time    {s['wall_seconds']:.1f} s; results in {s['out']}")
    failed = [name for name, ok in s["checks"].items() if not ok]
    if s["error"]:
        lines.append(f"  error        {s['error']}")
    lines.append("  verdict      " + ("CORRECT: after dedupe by order id the rejections equal the reference model's"
                                      if not failed else f"FAILED: {', '.join(failed)}"))
    return "\n".join(lines)


def render(summary: dict) -> str:
    if summary["scenario"] != "all":
        return render_scenario(summary)
    blocks = [render_scenario(s) for s in summary["scenarios"]]
    verdicts = ", ".join(f"{s['scenario']} {'passed' if s['passed'] else 'FAILED'}" for s in summary["scenarios"])
    blocks.append(f"All scenarios: {verdicts}; missing {sum(s['missing'] for s in summary['scenarios'])}, "
                  f"unexpected {sum(s['unexpected'] for s in summary['scenarios'])}")
    return "\n\n".join(blocks)
