"""Engines: what runs a deployment operation (preview, up, refresh, destroy).

`base` defines the interface and the progress-record vocabulary; `offline` runs the project's
program under Pulumi's mock runtime (the offline plan); `pulumi_engine` drives the Automation API;
`select` picks one from RAYPD_ENGINE and what is installed.
"""
