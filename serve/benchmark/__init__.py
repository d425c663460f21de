"""`python -m serve.benchmark`: load generator, summary and comparison for an OpenAI-compatible endpoint.

One job per module: workload (what to send), loadgen (sending it and timing the stream), summary
(pure numbers from the per-request records), table (a run's summary as the text `run` prints),
compare (side-by-side report of run directories), __main__ (the CLI, Contract 6).
docs/benchmark.md explains every number.
"""
