"""Deployments as the views (pages, API, the Benchmark tab) reach them, one call per request
(issue 16 §4): `commands.Deployments` is the facade the app attaches; its reads are reads.py's, the
job bodies workflow.py's, the response shapes views.py's. Below them: the store's rows
(webui/store/records.py) and the status words and their tables (webui/status.py), which the store
and the engines import too; neither imports this package."""
