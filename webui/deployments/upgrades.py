"""What the app completes once at start in records an older raypd wrote: the deployed-settings
records (migration 0004) and the stack settings files it kept under one server's RAYPD_HOME
(migration 0005)."""

from __future__ import annotations

import logging
from pathlib import Path

from webui.deployments.reads import validated
from webui.engines.select import EngineSet
from webui.engines.workdir import legacy_stack_file, stack_file_name
from webui.status import STANDING
from webui.store import Store
from webui.summary import summarize

logger = logging.getLogger(__name__)


def complete_deployed_records(store: Store, engines: EngineSet) -> int:
    """Fill in what an older raypd did not record about deployed settings (at start, once
    per record): a record for deployments it deployed before it kept them (their config
    could not change then, so it is what was deployed), the summaries the list shows, and
    an offline plan it kept in a file under one server's RAYPD_HOME. Returns how many."""
    offline = engines.get("offline")
    completed = 0
    for row in store.incomplete_deployed():
        deployed = row["deployed"]
        if deployed is None and row["status"] not in STANDING:
            continue  # never deployed: nothing to record
        config = row["config"] if deployed is None else deployed["config"]
        summary = None
        if deployed is None or not deployed["summary"]:
            spec, _problem = validated(config, row["name"])
            summary = summarize(spec) if spec is not None else None
        plan = None
        if row["engine"] == "offline" and offline is not None and (deployed is None or not deployed["plan"]):
            plan = offline.legacy_plan(row["name"])
        if deployed is not None and summary is None and plan is None:
            continue
        store.fill_in_deployed(row["name"], config=config if deployed is None else None,
                               summary=summary, plan=plan, at=row["lastOperationAt"])
        if plan is not None and offline is not None:
            offline.forget_legacy_plan(row["name"])
        completed += 1
    if completed:
        logger.info("completed the deployed-settings records of %d deployment(s) an older raypd wrote",
                    completed)
    return completed


def complete_stack_files(store: Store, engines: EngineSet, workspaces_dir: Path) -> int:
    """Move the stack settings files an older raypd kept under this server's RAYPD_HOME into the
    store (at start), so every server can run the deployment's jobs. An offline deployment's
    file is a function of its config, so one without a file anywhere gets it rebuilt; a real
    one whose file is on another server is logged (start that server once to move it)."""
    moved = 0
    for row in store.stacks_without_file():
        name, engine = row["name"], engines.get(row["engine"])
        text = legacy_stack_file(workspaces_dir / name, name)
        if text is not None:
            store.save_stack_file(name, text)
            (workspaces_dir / name / stack_file_name(name)).unlink(missing_ok=True)
            moved += 1
        elif row["engine"] == "offline" and engine is not None:
            spec, problem = validated(row["config"], name)
            if spec is None:
                logger.warning("no settings file for %s, and its config does not validate: %s", name, problem)
                continue
            engine.create(spec, None)
            moved += 1
        else:
            logger.warning("the Pulumi settings file of %s is not in the store: an older raypd kept it "
                           "under the RAYPD_HOME of the server that created it; start that server once "
                           "with this raypd to move it", name)
    if moved:
        logger.info("moved the stack settings files of %d deployment(s) into the store", moved)
    return moved
