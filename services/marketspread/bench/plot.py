"""bench.png: latency over time, the latency histogram, throughput and lag over time (and the search)."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from .analysis import StepData
from .stats import HISTOGRAM_EDGES_MS, histogram

__all__ = ["plot_step"]

_MAX_POINTS = 20_000


def plot_step(path: Path, result: dict, data: StepData | None, search: dict | None = None) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    panels = 4 if search else 3
    fig, axes = plt.subplots(panels, 1, figsize=(10, 3.2 * panels), constrained_layout=True)
    lat = result.get("latency_ms") or {}
    fig.suptitle(f"{result['system']} - {result['record_format']} records, {result['symbols']} symbols, "
                 f"{result['rate']:,.0f} msgs/s offered, sustained {result['sustained_msgs_per_s']:,.0f}; "
                 f"p50 {lat.get('p50') or 0:,.1f} ms, p99 {lat.get('p99') or 0:,.1f} ms", fontsize=10)

    # 1. latency over time, by receive time
    ax = axes[0]
    if data is not None and len(data.outputs.latency_ns):
        out = data.outputs
        x = (out.receive_ns - int(data.start * 1e9)) / 1e9
        y = out.latency_ns / 1e6
        pick = np.arange(len(x)) if len(x) <= _MAX_POINTS else np.random.default_rng(0).choice(
            len(x), _MAX_POINTS, replace=False)
        ax.scatter(x[pick], np.maximum(y[pick], 1e-3), s=4, alpha=0.5)
        ax.set_yscale("log")
    else:
        ax.text(0.5, 0.5, "no results received", ha="center", va="center", transform=ax.transAxes)
    ax.set_title("end-to-end latency (receive - intended send time) by receive time", fontsize=9)
    ax.set_xlabel("s since the first intended send time")
    ax.set_ylabel("ms")
    ax.grid(True, alpha=0.3)

    # 2. histogram (fixed log bins; weighted by messages for the probe)
    ax = axes[1]
    if data is not None and len(data.outputs.latency_ns):
        counts = histogram(data.outputs.latency_ns / 1e6, data.outputs.weights)
        edges = np.array(HISTOGRAM_EDGES_MS)
        lefts = np.concatenate([[edges[0] / 10 ** 0.1], edges])
        rights = np.concatenate([edges, [edges[-1] * 10 ** 0.1]])
        used = counts > 0
        ax.bar(lefts[used], counts[used], width=(rights - lefts)[used], align="edge", alpha=0.7)
        ax.set_xscale("log")
        for name in ("p50", "p99", "p999"):
            if lat.get(name):
                ax.axvline(lat[name], linestyle="--", linewidth=1, color="black")
                ax.text(lat[name], ax.get_ylim()[1] * 0.9, f" {name}", fontsize=8)
    ax.set_title("latency histogram (10 bins per decade)", fontsize=9)
    ax.set_xlabel("ms")
    ax.set_ylabel("results")
    ax.grid(True, alpha=0.3)

    # 3. throughput and lag
    ax = axes[2]
    series = result.get("series") or {}
    t = series.get("t") or []
    ax.plot(t, series.get("offered_msgs_per_s") or [], label="offered (senders, acknowledged)")
    ax.plot(t, series.get("processed_msgs_per_s") or [], label="processed (system's own counter)")
    ax.axhline(result["rate"], linestyle=":", color="grey", label="target rate")
    ax.axvline(result.get("load_seconds") or result["duration"], linestyle=":", color="black")
    ax.set_title("throughput (2 s windows) and lag", fontsize=9)
    ax.set_xlabel("s since the first intended send time")
    ax.set_ylabel("msgs/s")
    ax.grid(True, alpha=0.3)
    lag_ax = ax.twinx()
    lag_ax.plot(t, series.get("lag_messages") or [], color="red", alpha=0.6, label="lag (messages)")
    lag_ax.set_ylabel("lag, messages")
    handles = ax.get_legend_handles_labels()[0] + lag_ax.get_legend_handles_labels()[0]
    ax.legend(handles=handles, fontsize=8, loc="upper right")

    if search:
        ax = axes[3]
        steps = search["steps"]
        for ok, colour, name in ((True, "green", "sustained"), (False, "red", "not sustained")):
            xs = [s["rate"] for s in steps if s["sustainable"] == ok]
            ys = [s["sustained_msgs_per_s"] for s in steps if s["sustainable"] == ok]
            ax.scatter(xs, ys, color=colour, label=name, zorder=3)
        rates = [s["rate"] for s in steps]
        if rates:
            ax.plot([min(rates), max(rates)], [min(rates), max(rates)], color="grey", linestyle=":")
        if search.get("max_sustainable_rate"):
            ax.axvline(search["max_sustainable_rate"], color="green", linestyle="--")
        ax.set_xscale("log")
        ax.set_title(f"--find-max: max sustainable {search.get('max_sustainable_rate') or 0:,.0f} msgs/s "
                     f"(bounded by {search.get('bounded_by')})", fontsize=9)
        ax.set_xlabel("offered msgs/s")
        ax.set_ylabel("sustained msgs/s")
        ax.grid(True, alpha=0.3)
        ax.legend(fontsize=8)

    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=90)
    plt.close(fig)
