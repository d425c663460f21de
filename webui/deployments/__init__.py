"""Deployments as the views (pages, API, the Benchmark tab) reach them, one call per request
(issue 16 §4): `commands.Deployments` is the facade the app attaches; its reads are reads.py's, the
job bodies workflow.py's, the response shapes views.py's, the store's rows records.py's, the status
words and their tables lifecycle.py's. This file imports nothing: the store imports lifecycle."""
