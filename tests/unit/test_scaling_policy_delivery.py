"""How the PD scaling policy reaches Ray: one self-contained file, a ConfigMap, PYTHONPATH, a Serve block.

Serve's build task imports the policy by its path and cloudpickles the module BY VALUE (ray/serve/
_private/application_state.py `build_serve_application` `_get_serialized_def`, Ray 2.58 and 2.60);
cloudpickle does not carry what the module imports ("it doesn't vendor transitive dependencies",
Serve's advanced-autoscaling guide, Gotchas). So the file must import nothing but the standard
library, and must work alone on a Python path that holds nothing of raypd: exactly what the
ConfigMap mounted at POLICY_DIR gives the Ray containers.
"""

from __future__ import annotations

import ast
import hashlib
import json
import subprocess
import sys
from pathlib import Path

from components.render.scaling_policy import delivery
from components.render.scaling_policy.delivery import (
    POLICY_DIR,
    POLICY_FILE,
    POLICY_IMPORT_PATH,
    application_autoscaling_policy,
    policy_config_map,
    policy_runtime_env,
    policy_volume,
    policy_volume_mount,
)


def imported_top_levels(path: Path) -> set[str]:
    names = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            names.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names.add(node.module.split(".")[0])
        elif isinstance(node, ast.ImportFrom):
            names.add("." * node.level)  # a relative import: the file would not stand alone
    return names


def test_the_policy_imports_only_the_standard_library() -> None:
    imported = imported_top_levels(POLICY_FILE)
    assert imported <= set(sys.stdlib_module_names), f"not standard library: {imported - set(sys.stdlib_module_names)}"


def test_the_config_maps_file_alone_serves_the_import_path(tmp_path: Path) -> None:
    """A fresh interpreter whose path holds only the mounted directory (no raypd, no Ray) imports
    the path the Serve config names and calls it with Serve's argument shape."""
    config_map = policy_config_map("ray-llm", "inference", {})
    mount = tmp_path / "mount"
    mount.mkdir()
    for key, text in config_map["data"].items():
        (mount / key).write_text(text, encoding="utf-8")
    module, function = POLICY_IMPORT_PATH.split(":")
    # -S: no site-packages (neither raypd's venv nor Ray); the mount first, as PYTHONPATH puts it
    script = (f"import importlib, sys; sys.path.insert(0, {str(mount)!r})"
              f"; policy = getattr(importlib.import_module({module!r}), {function!r}); print(policy({{}}))")
    result = subprocess.run([sys.executable, "-S", "-c", script], capture_output=True, text=True, timeout=60,
                            cwd=tmp_path, env={"PATH": "/usr/bin:/bin"})
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "({}, {})"


def test_the_serve_block_names_the_mounted_module_and_digests_its_text() -> None:
    block = application_autoscaling_policy()
    assert block["policy_function"] == "raypd_pd_autoscaling:pd_phase_policy"
    assert POLICY_FILE.name == "raypd_pd_autoscaling.py"
    data = policy_config_map("ray-llm", "inference", {})["data"]
    assert list(data) == ["raypd_pd_autoscaling.py"]
    digest = hashlib.sha256(data["raypd_pd_autoscaling.py"].encode()).hexdigest()
    assert block["policy_kwargs"] == {"source_sha256": digest}
    assert json.loads(json.dumps(block)) == block  # Serve requires JSON-serializable policy_kwargs


def test_the_config_map_carries_the_file_verbatim() -> None:
    config_map = policy_config_map("ray-llm", "inference", {"app.kubernetes.io/managed-by": "raypd"})
    assert config_map["apiVersion"] == "v1" and config_map["kind"] == "ConfigMap"
    assert config_map["metadata"] == {"name": "ray-llm-serve-policy", "namespace": "inference",
                                      "labels": {"app.kubernetes.io/managed-by": "raypd"}}
    assert config_map["data"]["raypd_pd_autoscaling.py"] == POLICY_FILE.read_text(encoding="utf-8")


def test_every_ray_container_finds_the_file_where_pythonpath_points() -> None:
    volume, mount, runtime_env = policy_volume("ray-llm"), policy_volume_mount(), policy_runtime_env()
    assert volume == {"name": mount["name"], "configMap": {"name": "ray-llm-serve-policy"}}
    assert mount == {"name": "raypd-serve-policy", "mountPath": POLICY_DIR, "readOnly": True}
    assert "subPath" not in mount  # a subPath mount would never see a changed ConfigMap
    # Prepended, the image's own PYTHONPATH kept: Ray expands ${PYTHONPATH} when it starts the worker.
    assert runtime_env == {"env_vars": {"PYTHONPATH": POLICY_DIR + ":${PYTHONPATH}"}}


def test_a_changed_policy_text_changes_the_serve_block(monkeypatch, tmp_path: Path) -> None:
    """Serve hashes the block into the app's code version: a new text must change it, or the
    controller would keep running the bytes it pickled from the old one."""
    before = application_autoscaling_policy()
    changed = tmp_path / "raypd_pd_autoscaling.py"
    changed.write_text(POLICY_FILE.read_text(encoding="utf-8") + "\n# changed\n", encoding="utf-8")
    monkeypatch.setattr(delivery, "POLICY_FILE", changed)
    assert application_autoscaling_policy()["policy_kwargs"] != before["policy_kwargs"]
    assert application_autoscaling_policy()["policy_function"] == before["policy_function"]
