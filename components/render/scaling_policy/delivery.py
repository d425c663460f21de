"""How raypd's PD scaling policy reaches Ray: the Serve config block, and the file on every Ray pod.

Which Ray process imports a policy named in a Serve config (read in Ray 2.58, the DLC's, and 2.60):
- a DEPLOYMENT-level `autoscaling_config.policy.policy_function` is imported wherever the config is
  validated: `AutoscalingPolicy.__init__` calls `serialize_policy`, which imports the path
  (ray/serve/config.py), and pydantic builds it while validating `DeploymentSchema.autoscaling_config`
  in the dashboard's REST handler (dashboard/modules/serve/serve_head.py) and again in the
  controller (`override_deployment_info` rebuilds `DeploymentConfig`, application_state.py). Those
  processes do not run with the application's runtime_env;
- the APPLICATION-level `autoscaling_policy: {policy_function}` is a plain dict in
  `ServeApplicationSchema` (schema.py), imported only by the build task
  (`build_serve_application`, with the application's runtime_env), which cloudpickles the module by
  value; the controller builds `AutoscalingPolicy(_serialized_policy_def=...)` from those bytes and
  never imports the path (application_state.py; also on recovery from its checkpoint).
So raypd names its policy at the application level, and only the build task must find the module.
The build task is a Ray task with no node affinity (`num_cpus=0`), so it can run on any Ray node:
the file goes on every Ray container (a ConfigMap mounted read-only at POLICY_DIR, head and every
worker group), and the application's runtime_env puts POLICY_DIR in front of PYTHONPATH
(`policy_runtime_env`). A runtime_env `py_modules` would need a remote URI (an S3 or HTTPS zip)
that raypd does not have; the ConfigMap needs nothing beyond the cluster.

Changes (ray/serve/_private/deploy_utils.py `get_app_code_version` hashes `autoscaling_policy`
and `runtime_env` beside import_path and args): adding, removing or changing either rebuilds the
application and restarts every replica, i.e. every engine reloads its model. raypd renders them
only for a disaggregated app with an autoscaled phase (components.render.scaling_policy.rendering
`uses_pd_policy`); turning autoscaling on or off is such a restart anyway (the deployments'
policies are in the code version too). The file's digest is in `policy_kwargs`, which Serve
passes only to class policies and otherwise just hashes, so that a new policy text reaches the
controller (with that same restart) instead of the old bytes living on in its checkpoint.
"""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any, Mapping

POLICY_MODULE = "raypd_pd_autoscaling"
POLICY_FUNCTION = "pd_phase_policy"
POLICY_IMPORT_PATH = f"{POLICY_MODULE}:{POLICY_FUNCTION}"
POLICY_FILE = Path(__file__).with_name(POLICY_MODULE + ".py")
# Where the ConfigMap's file appears in every Ray container; nothing of the image lives there.
POLICY_DIR = "/opt/raypd/python"
VOLUME_NAME = "raypd-serve-policy"
CONFIG_MAP_KEY = POLICY_MODULE + ".py"
SOURCE_DIGEST_KWARG = "source_sha256"


def policy_source() -> str:
    """The policy module's text, exactly as the ConfigMap carries it."""
    return POLICY_FILE.read_text(encoding="utf-8")


def policy_source_sha256() -> str:
    return hashlib.sha256(policy_source().encode("utf-8")).hexdigest()


def application_autoscaling_policy() -> dict[str, Any]:
    """The Serve application's `autoscaling_policy` block (beside `import_path`, `args`, `deployments`)."""
    return {"policy_function": POLICY_IMPORT_PATH,
            "policy_kwargs": {SOURCE_DIGEST_KWARG: policy_source_sha256()}}


def config_map_name(ray_service_name: str) -> str:
    return f"{ray_service_name}-serve-policy"


def policy_config_map(ray_service_name: str, namespace: str, labels: Mapping[str, str]) -> dict[str, Any]:
    """The ConfigMap holding the policy file (create it before the RayService that mounts it)."""
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": config_map_name(ray_service_name), "namespace": namespace, "labels": dict(labels)},
        "data": {CONFIG_MAP_KEY: policy_source()},
    }


def policy_volume(ray_service_name: str) -> dict[str, Any]:
    """For the `volumes` of the head's and every worker group's pod template."""
    return {"name": VOLUME_NAME, "configMap": {"name": config_map_name(ray_service_name)}}


def policy_volume_mount() -> dict[str, Any]:
    """For the `volumeMounts` of the Ray container of the head and of every worker group. A whole
    directory, not a subPath: Kubernetes updates a directory mount when the ConfigMap changes."""
    return {"name": VOLUME_NAME, "mountPath": POLICY_DIR, "readOnly": True}


def policy_runtime_env() -> dict[str, Any]:
    """The Serve application's `runtime_env`: the directory first on PYTHONPATH, what was there kept.

    Not a container env var: Kubernetes expands `$(PYTHONPATH)` only from variables set earlier in
    the pod spec, never from the image's own ENV, so a PYTHONPATH set there would silently replace
    whatever the DLC image puts on it. Ray expands `${PYTHONPATH}` in a runtime_env's env_vars from
    the worker's environment when it starts the process (Ray 2.58/2.60 ray/_private/utils.py
    `update_envs`: `os.path.expandvars`, an unset variable becomes ""), and Serve starts the build
    task with the application's runtime_env (application_state.py `build_serve_application
    .options(runtime_env=config.runtime_env)`). The engines inherit it too; a directory holding one
    module nothing else imports changes nothing for them."""
    return {"env_vars": {"PYTHONPATH": POLICY_DIR + ":${PYTHONPATH}"}}
