"""`python -m serve.resilience`: what a fault costs a running deployment, measured (issue 31 §2).

Golden answers first, then a steady load with one fault injected under it (a prefill or decode
engine's pod deleted, the Ray head's pod deleted, or a GPU node cordoned and drained), then a
report (Contract 8): time to recover, requests failed before and after their first token, answers
that came back 200 but differ from the golden answer, finish_reason counts, a wedge (pods Ready
while requests keep failing), and the decode's KV counters before and after.

One module per job: golden (the golden answers and the load's settings, sent by
serve.benchmark.loadgen), judge (pure functions of the records: outcomes, recovery, the
timeline, the wedge), report (the JSON document and the table), plot (the timeline PNG), run (the
run itself, against two small interfaces, `Fault` and `Target`), faults (those interfaces through
the Kubernetes API, checked against the stack outputs as serve.verify reads them), __main__ (the CLI).
"""
