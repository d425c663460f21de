"""How `pulumi up` knows the Serve application it just changed is RUNNING, not the old one, and
(zero-downtime stacks) that KubeRay has moved traffic to the new Ray cluster.

Three waits, because KubeRay's status cannot tell an in-place Serve update apart on its own, and
a Ray cluster switch is a state of its own:

1. The RayService carries `pulumi.com/waitFor` (`rayservice_await_annotations`): condition Ready
   AND each application's `status.activeServiceStatus.applicationStatuses.<app>.status` RUNNING.
   pulumi-kubernetes (4.18+, `pkg/await/condition`) requires every expression of a JSON list at
   once and checks each only when `status.observedGeneration` has caught up with
   `metadata.generation`. That is enough for a new RayService (first deploy, or a replacement after
   a Ray cluster change): its application appears only once deployed. Ready alone is not: KubeRay
   sets it when the serve Service has endpoints, which can be before the application runs.

2. An in-place Serve change (model settings, replicas...) is not covered by 1: KubeRay 1.4-1.7
   (`rayservice_controller.go`, reconcileServe) reads the applications' status from the dashboard
   BEFORE it submits the new config, and the same reconcile writes that pre-submission status
   together with observedGeneration = the new generation. The old application's RUNNING then
   satisfies 1 at once. So a Job (`serve_rollout_job`) named after the Serve config's digest
   is created on every Serve change, after the RayService: it polls Ray's Serve REST API on the
   head service (`GET /api/serve/applications/`) until every application's `deployed_app_config`
   carries the new args and replica counts (the `deployments` overrides, components.render.serve_config)
   AND its status is RUNNING; DEPLOY_FAILED ends it at once with Serve's message (the pod's
   termination message, which Pulumi reports with the failed Job). Pulumi awaits Jobs until
   Complete, so `pulumi up` returns when the new application serves, or fails saying why.

3. A zero-downtime stack (`raypd:upgradeStrategy: newCluster`, KubeRay's NewCluster) gets a new Ray
   cluster for every change of the part of rayClusterConfig KubeRay hashes
   (components.render.rayservice.cluster_rebuild_digest): GPU instance types, the system node type,
   rayVersion, observability's ports, the switch from inPlace itself, and with them a new generation
   of GPU node groups (components.render.rayservice.node_set). Such a change may leave the Serve
   config and the image alone, so the Job of 2 keeps its name and does not run; and while KubeRay
   builds the pending cluster, only that one is reconciled and traffic moves when it is ready
   (rayservice_controller.go, Reconcile and calculateStatus). So the RayService of such a stack
   also waits for `condition=UpgradeInProgress=False` (`UPGRADE_DONE`). KubeRay sets it True in
   the very status write that first carries the new observedGeneration (calculateStatus prepares
   the pending cluster's name, calculateConditions sees both clusters), and False in the one that
   promotes the pending cluster to active; pulumi-kubernetes checks a condition only at its own
   observedGeneration (`pkg/await/condition/kubectl.go`, checkCondition). The RayService's spec
   changes with every such change, so Pulumi updates it and awaits this, keyed on exactly what
   makes KubeRay build a new cluster. The old generation of node groups (and an old system node
   group) is deleted after that: Pulumi deletes what the program no longer registers, and the old
   half of a create-before-delete replacement, only once every registered resource's step, await
   included, has finished (pulumi/pulumi pkg/resource/deploy/deployment_executor.go,
   `performPostSteps` after the program's last event; step_generator.go: "the delete step is
   generated later on, after all creates/updates finish"). KubeRay 1.4 to 1.7 also empty
   `activeServiceStatus.applicationStatuses` while the pending cluster exists, so the RUNNING
   expression of 1 fails meanwhile too, but only as a side effect of not reconciling the active
   cluster; the condition is KubeRay's own word for the switch. In-place stacks (upgradeStrategy
   None) never have a pending cluster, and their await stays as it was.

A failed check must not block the next `up`: the Job keeps its name while the Serve config is the
same, and pulumi-kubernetes re-awaits an unready resource on every later update (which fails at
once for a failed Job). `pulumi.com/replaceUnready: "true"` makes the provider's Diff read the live
Job and, when it is not Ready (failed, or still running from an interrupted update), replace it
(provider/pkg/provider/provider.go, `metadata.ReplaceUnready`, Jobs only): the next `up` runs a
fresh check.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

import yaml

from components.config import defaults

WAIT_FOR_ANNOTATION = "pulumi.com/waitFor"
TIMEOUT_ANNOTATION = "pulumi.com/timeoutSeconds"
REPLACE_UNREADY_ANNOTATION = "pulumi.com/replaceUnready"
# The model load (image pull + weights download on every node) can take tens of minutes on big
# checkpoints.
ROLLOUT_TIMEOUT_SECONDS = 3600
# The check gives up a little before Pulumi does, so its own message is what the user reads.
CHECK_MARGIN_SECONDS = 120
POLL_SECONDS = 10
# False once KubeRay has promoted the pending Ray cluster (the module docstring, 3). The condition
# type and its True/False transitions: ray-operator/apis/ray/v1/rayservice_types.go and
# rayservice_controller.go calculateConditions, v1.4.0 to v1.7.0 alike.
UPGRADE_DONE = "condition=UpgradeInProgress=False"

_CHECK_SCRIPT = r'''
import json, os, sys, time, urllib.request

url = os.environ["SERVE_API"]
expected = json.loads(os.environ["EXPECTED_ARGS"])
deadline = time.time() + float(os.environ["DEADLINE_SECONDS"])
poll = float(os.environ["POLL_SECONDS"])


def finish(code, why):
    with open(os.environ.get("TERMINATION_LOG", "/dev/termination-log"), "w") as log:
        log.write(why[:4000])
    print(why, file=sys.stderr if code else sys.stdout, flush=True)
    sys.exit(code)


last = "no answer from the Serve API yet"
while time.time() < deadline:
    try:
        with urllib.request.urlopen(url, timeout=10) as answer:
            apps = json.load(answer).get("applications") or {}
    except Exception as exc:
        last = "Serve API at %s not answering: %s" % (url, exc)
        print(last, flush=True)
        time.sleep(poll)
        continue
    waiting = []
    for name, want in sorted(expected.items()):
        app = apps.get(name) or {}
        status, message = app.get("status"), (app.get("message") or "").strip()
        deployed = app.get("deployed_app_config") or {}
        replicas = {d.get("name"): d.get("num_replicas") for d in deployed.get("deployments") or []}
        if deployed.get("args") != want["args"] or any(
                replicas.get(d) != n for d, n in want["replicas"].items()):
            waiting.append("%s: the new Serve config is not deployed yet (status %s)" % (name, status))
        elif status == "DEPLOY_FAILED":
            finish(1, "Serve application %s failed to deploy the new config: %s" % (name, message))
        elif status != "RUNNING":
            waiting.append("%s: %s %s" % (name, status, message))
    if not waiting:
        finish(0, "the new Serve config is RUNNING: %s" % ", ".join(sorted(expected)))
    last = "; ".join(waiting)
    print(last, flush=True)
    time.sleep(poll)
finish(1, "timed out waiting for the new Serve config: " + last)
'''


def check_script() -> str:
    """The rollout check's Python source (standard library only; tests run it locally)."""
    return _CHECK_SCRIPT


def serve_applications(serve_config_v2: str) -> dict[str, Any]:
    """Application name -> {"args", "replicas": {deployment: num_replicas}}, from serveConfigV2."""
    document = yaml.safe_load(serve_config_v2) or {}
    return {
        app["name"]: {
            "args": app.get("args", {}),
            "replicas": {d["name"]: d["num_replicas"] for d in app.get("deployments") or []
                         if "num_replicas" in d},
        }
        for app in document.get("applications", [])
    }


def rayservice_await_annotations(serve_config_v2: str, upgrade_strategy: str) -> dict[str, str]:
    """`pulumi.com/waitFor` and its timeout for the RayService (the module docstring, 1 and 3):
    Ready, no NewCluster upgrade in progress (zero-downtime stacks), every application RUNNING."""
    expressions = ["condition=Ready"]
    if upgrade_strategy == "newCluster":
        expressions.append(UPGRADE_DONE)
    expressions += [
        f"jsonpath={{.status.activeServiceStatus.applicationStatuses.{name}.status}}=RUNNING"
        for name in sorted(serve_applications(serve_config_v2))
    ]
    return {
        WAIT_FOR_ANNOTATION: json.dumps(expressions),
        TIMEOUT_ANNOTATION: str(ROLLOUT_TIMEOUT_SECONDS),
    }


def rollout_digest(rayservice: dict[str, Any]) -> str:
    """Changes with the Serve config or the image, i.e. whenever the running app must change."""
    spec = rayservice["spec"]
    head = spec["rayClusterConfig"]["headGroupSpec"]["template"]["spec"]["containers"][0]
    text = spec["serveConfigV2"] + "\n" + head["image"]
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:8]


def serve_rollout_job(rayservice: dict[str, Any]) -> dict[str, Any]:
    """The Job that succeeds once the RayService's current Serve config is RUNNING (see 2 above).

    It runs the Ray image (already on the system node that hosts the Ray head, so no extra pull)
    with the standard library only, next to the head, and talks to KubeRay's head Service.
    """
    name = rayservice["metadata"]["name"]
    namespace = rayservice["metadata"]["namespace"]
    spec = rayservice["spec"]
    head = spec["rayClusterConfig"]["headGroupSpec"]["template"]["spec"]["containers"][0]
    serve_api = (f"http://{name}-head-svc.{namespace}.svc.cluster.local:"
                 f"{defaults.DASHBOARD_PORT}/api/serve/applications/")
    expected = serve_applications(spec["serveConfigV2"])
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {
            # A new name per Serve config: Pulumi creates (and awaits) a new Job on every change.
            "name": f"{name}-check-{rollout_digest(rayservice)}",
            "namespace": namespace,
            "labels": {"app.kubernetes.io/name": "raypd", "app.kubernetes.io/instance": name,
                       "app.kubernetes.io/component": "serve-rollout-check"},
            "annotations": {TIMEOUT_ANNOTATION: str(ROLLOUT_TIMEOUT_SECONDS),
                            REPLACE_UNREADY_ANNOTATION: "true"},
        },
        "spec": {
            # The script retries by itself; a second pod only if the first one was lost.
            "backoffLimit": 1,
            "activeDeadlineSeconds": ROLLOUT_TIMEOUT_SECONDS,
            "template": {
                # The NetworkPolicies admit this pod to the Ray dashboard by this label
                # (components.render.network_policy.ROLLOUT_CHECK_POD_LABELS).
                "metadata": {"labels": {"app.kubernetes.io/component": "serve-rollout-check"}},
                "spec": {
                    "restartPolicy": "Never",
                    "nodeSelector": dict(defaults.SYSTEM_LABELS),
                    "containers": [{
                        "name": "serve-rollout-check",
                        "image": head["image"],
                        "imagePullPolicy": "IfNotPresent",
                        "command": ["python3", "-c", check_script()],
                        "env": [
                            {"name": "SERVE_API", "value": serve_api},
                            {"name": "EXPECTED_ARGS", "value": json.dumps(expected, sort_keys=True)},
                            {"name": "DEADLINE_SECONDS",
                             "value": str(ROLLOUT_TIMEOUT_SECONDS - CHECK_MARGIN_SECONDS)},
                            {"name": "POLL_SECONDS", "value": str(POLL_SECONDS)},
                        ],
                        "resources": {"requests": {"cpu": "50m", "memory": "128Mi"},
                                      "limits": {"memory": "256Mi"}},
                        "terminationMessagePolicy": "FallbackToLogsOnError",
                    }],
                }
            },
        },
    }
