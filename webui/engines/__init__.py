"""Engines: what runs a deployment operation (preview, up, refresh, destroy).

`base` defines the interface and the progress-record vocabulary; `offline` runs the project's
program under Pulumi's mock runtime (the offline plan); `pulumi_engine` drives the Automation API
(`pulumi_cli` finds the CLI, `pulumi_io` holds what goes to it and comes back, as pure functions);
`select` picks one from RAYPD_ENGINE and what is installed.
"""
