"""`marketspread bench`: open-loop load, latency from intended send times, peers side by side.

| module | job |
|---|---|
| cli.py | `marketspread bench`, `bench-peer`, `bench-probe` |
| settings.py | `BenchSettings` (one run or search), `PeerSettings`, `ProbeSettings` |
| stats.py | pure numbers: weighted nearest-rank percentiles, mergeable log histograms, robust slopes, the lag trend test |
| search.py | `--find-max`: geometric steps up, then bisection (pure, driven by a `measure(rate)` callable) |
| systems.py | what each system under test is: how it starts, where its processed offsets and message counts are |
| expected.py | the rejections the reference model expects for the generated orders actually sent |
| sampling.py | psutil process trees (CPU seconds, peak RSS) and the metrics time series of a step |
| session.py | one system on the stack: topics, output consumer, the system, initial NBBO; steps at given rates |
| analysis.py | a step's samples and outputs -> its result (throughput, latency, lag trend, loss, resources) |
| runner.py | one measurement or one `--find-max` search of a system (a fresh session when a step left a backlog) |
| report.py | bench.json, the text summary |
| plot.py | bench.png |
| progress.py | the progress bar |
| machine.py | cores, memory, CPU model, load average, versions |
| suite.py | `--all`: the comparison, and docs/benchmarks.md |
| peers/ | the peers (`passthrough`, `plain`, `quix`) and the passthrough's latency probe, each its own process |
"""
