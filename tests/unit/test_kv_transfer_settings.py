"""raypd:kvTransfer.loadFailurePolicy and leaseSeconds (issue 31 §1): chosen, not defaulted, in BOTH
phases' kv_transfer_config, refused with the key named when out of range, warned about where risky or
ignored (colocated), and named by the change preview as what restarts every engine.

vLLM's field names: `KVTransferConfig.kv_load_failure_policy` (vllm/config/kv_transfer.py, "fail" |
"recompute") and the NIXL connector's `kv_connector_extra_config["kv_lease_duration"]`
(nixl/base_scheduler.py on prefill, nixl/base_worker.py on decode). The last test hands the rendered
dicts to the real venv's vLLM (0.32) KVTransferConfig, without starting an engine.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest

from components.changes.assess import assess
from components.changes.effects import Kind
from components.config.errors import SpecError
from components.config.spec import DeploymentSpec
from components.plan.topology import plan_deployment
from components.render.serve_config import render_serve_config
from tests.real.locate import real_vllm, skip_reason


def kv_configs(config: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """Each phase's rendered kv_transfer_config (none in colocated mode)."""
    args = render_serve_config(plan_deployment(DeploymentSpec.from_config(config, "dev")))["applications"][0]["args"]
    if "llm_configs" in args:
        return {"colocated": args["llm_configs"][0]["engine_kwargs"].get("kv_transfer_config")}
    return {phase: args[f"{phase}_config"]["engine_kwargs"]["kv_transfer_config"] for phase in ("prefill", "decode")}


def refused(config: dict[str, Any], strict: bool = False) -> dict[str, str]:
    with pytest.raises(SpecError) as caught:
        DeploymentSpec.from_config(config, "dev", strict=strict)
    return {error.field: error.message for error in caught.value.errors}


def test_by_default_both_phases_fail_the_request_and_hold_the_kv_for_300_seconds():
    for phase, kv in kv_configs({}).items():
        assert kv["kv_load_failure_policy"] == "fail", phase
        assert kv["kv_connector_extra_config"]["kv_lease_duration"] == 300, phase
        assert kv["kv_connector_extra_config"]["backends"] == ["LIBFABRIC"], phase


def test_the_chosen_policy_and_lease_reach_prefill_and_decode_alike():
    chosen = {"raypd:kvTransfer": {"loadFailurePolicy": "recompute", "leaseSeconds": 45, "backend": "UCX"}}
    configs = kv_configs(chosen)
    assert set(configs) == {"prefill", "decode"}
    for phase, kv in configs.items():
        # prefill expires its blocks by the lease, decode renews it: both must read the same value.
        assert kv["kv_load_failure_policy"] == "recompute", phase
        assert kv["kv_connector_extra_config"] == {"backends": ["UCX"], "kv_lease_duration": 45}, phase


@pytest.mark.parametrize(("value", "words"), [
    ({"leaseSeconds": 5}, "greater than or equal to 6"),
    ({"leaseSeconds": 3601}, "less than or equal to 3600"),
    ({"leaseSeconds": 30.5}, "integer"),
    ({"leaseSeconds": "soon"}, "integer"),
    ({"leaseSeconds": True}, "integer"),
    ({"loadFailurePolicy": "retry"}, "'fail' or 'recompute'"),
    ({"loadFailurePolicy": "FAIL"}, "'fail' or 'recompute'"),
])
def test_a_bad_value_is_refused_naming_its_key(value, words):
    (key,) = value
    errors = refused({"raypd:kvTransfer": value}, strict=True)
    assert list(errors) == [f"raypd:kvTransfer.{key}"]
    assert words in errors[f"raypd:kvTransfer.{key}"]


def test_a_lease_given_as_text_is_refused_by_the_json_api_and_read_from_a_stack_file():
    as_text = {"raypd:kvTransfer": {"leaseSeconds": "300"}}
    assert list(refused(as_text, strict=True)) == ["raypd:kvTransfer.leaseSeconds"]
    # Pulumi config carries numbers as text.
    spec = DeploymentSpec.from_config({"raypd:kvTransfer": '{"leaseSeconds": "120"}'}, "dev")
    assert spec.kv_transfer.lease_seconds == 120


def test_recompute_and_a_lease_shorter_than_vllms_are_warned_about():
    warnings = DeploymentSpec.from_config(
        {"raypd:kvTransfer": {"loadFailurePolicy": "recompute", "leaseSeconds": 10}}, "dev").warnings
    recompute = [w for w in warnings if w.startswith("raypd:kvTransfer.loadFailurePolicy is recompute")]
    short = [w for w in warnings if w.startswith("raypd:kvTransfer.leaseSeconds 10")]
    assert len(recompute) == 1 and "200" in recompute[0] and "vllm#49250" in recompute[0]
    assert len(short) == 1 and "wrong text" in short[0]
    assert not [w for w in DeploymentSpec.from_config({}, "dev").warnings if "kvTransfer" in w]


def test_colocated_stacks_move_no_kv_and_say_the_chosen_settings_are_ignored():
    chosen = {"raypd:mode": "colocated", "raypd:kvTransfer": {"loadFailurePolicy": "recompute", "leaseSeconds": 60}}
    assert kv_configs(chosen) == {"colocated": None}
    (note,) = [w for w in DeploymentSpec.from_config(chosen, "dev").warnings if "kvTransfer" in w]
    assert note == ("raypd:kvTransfer.loadFailurePolicy recompute, raypd:kvTransfer.leaseSeconds 60: "
                    "ignored in mode colocated (no KV transfer between engines)")
    # Left at the defaults: nothing to say.
    assert not [w for w in DeploymentSpec.from_config({"raypd:mode": "colocated"}, "dev").warnings
                if "kvTransfer" in w]


@pytest.mark.parametrize(("change", "path"), [
    ({"leaseSeconds": 600}, "kv_connector_extra_config.kv_lease_duration"),
    ({"loadFailurePolicy": "recompute"}, "kv_load_failure_policy"),
])
def test_the_preview_says_a_change_restarts_every_prefill_and_decode_engine(change, path):
    result = assess(plan_deployment(DeploymentSpec.from_config({}, "dev")),
                    plan_deployment(DeploymentSpec.from_config({"raypd:kvTransfer": change}, "dev")), "us-east-2a")
    (effect,) = result.effects
    assert effect.kind == Kind.RESTART_ENGINES
    assert f"engine_kwargs.kv_transfer_config.{path}" in effect.detail
    assert "every prefill and every decode engine restarts" in effect.detail
    assert effect.downtime_seconds > 0  # the reference runs one engine per phase


def test_colocated_stacks_restart_nothing_for_a_kv_setting():
    result = assess(plan_deployment(DeploymentSpec.from_config({"raypd:mode": "colocated"}, "dev")),
                    plan_deployment(DeploymentSpec.from_config(
                        {"raypd:mode": "colocated", "raypd:kvTransfer": {"leaseSeconds": 600}}, "dev")), "us-east-2a")
    assert [effect.kind for effect in result.effects] == [Kind.NO_SERVING_EFFECT]


# Run in the real venv: builds vLLM's own KVTransferConfig from each rendered dict (no engine starts)
# and reads back what the scheduler and the NIXL connector read; a bad policy must be refused, which
# proves the probe sees vLLM's validation at all.
_PROBE = """
import json, sys
from vllm.config import KVTransferConfig
answers = {}
for name, kv in json.load(sys.stdin).items():
    config = KVTransferConfig(**kv)
    answers[name] = {"policy": config.kv_load_failure_policy,
                     "lease": config.get_from_extra_config("kv_lease_duration", 30),
                     "backends": config.get_from_extra_config("backends", ["UCX"])}
try:
    KVTransferConfig(kv_connector="NixlConnector", kv_role="kv_both", kv_load_failure_policy="retry")
    answers["refused-bad-policy"] = False
except Exception:
    answers["refused-bad-policy"] = True
print(json.dumps(answers))
"""


@pytest.mark.slow
def test_vllms_own_kv_transfer_config_accepts_what_both_phases_get():
    reason = skip_reason()
    if reason is not None:
        pytest.skip(f"vLLM's KVTransferConfig is in the real venv only: {reason}")
    cases = {f"{name}/{phase}": kv for name, config in {
        "reference": {}, "chosen": {"raypd:kvTransfer": {"loadFailurePolicy": "recompute", "leaseSeconds": 45}},
    }.items() for phase, kv in kv_configs(config).items()}
    result = subprocess.run([str(real_vllm().python), "-c", _PROBE], input=json.dumps(cases),
                            capture_output=True, text=True, timeout=600,
                            env={"VLLM_NO_USAGE_STATS": "1", "HF_HUB_OFFLINE": "1", "PATH": "/usr/bin:/bin",
                                 "HOME": str(Path.home())})
    assert result.returncode == 0, result.stderr[-3000:]
    answers = json.loads([line for line in result.stdout.splitlines() if line.startswith("{")][-1])
    assert answers.pop("refused-bad-policy") is True
    assert answers == {
        "reference/prefill": {"policy": "fail", "lease": 300, "backends": ["LIBFABRIC"]},
        "reference/decode": {"policy": "fail", "lease": 300, "backends": ["LIBFABRIC"]},
        "chosen/prefill": {"policy": "recompute", "lease": 45, "backends": ["LIBFABRIC"]},
        "chosen/decode": {"policy": "recompute", "lease": 45, "backends": ["LIBFABRIC"]},
    }
