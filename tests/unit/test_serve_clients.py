"""raypd:inClusterClients: validated like every Contract 1 key, errors naming the entry."""

from __future__ import annotations

import pytest

from components.config.errors import SpecError
from components.config.spec import DeploymentSpec

KEY = "raypd:inClusterClients"


def errors(value) -> list[str]:
    with pytest.raises(SpecError) as caught:
        DeploymentSpec.from_config({KEY: value})
    return [str(error) for error in caught.value.errors]


def test_namespaces_are_kept_in_order_and_default_to_none():
    assert DeploymentSpec().in_cluster_clients == ()
    assert DeploymentSpec.from_config({KEY: ["apps", "ci"]}).in_cluster_clients == ("apps", "ci")
    # Pulumi hands lists over as JSON text.
    assert DeploymentSpec.from_config({KEY: '["apps"]'}).in_cluster_clients == ("apps",)


def test_the_default_leaves_no_key_in_the_public_config():
    assert KEY not in DeploymentSpec().public_config()
    assert DeploymentSpec.from_config({KEY: ["apps"]}).public_config()[KEY] == ["apps"]


@pytest.mark.parametrize("value, expected", [
    ("apps", f"{KEY}: must be a list of namespace names"),
    (["Apps"], f"{KEY}[0]: 'Apps' is not a Kubernetes namespace name"),
    (["apps", "apps"], f"{KEY}[1]: 'apps' is given twice (also [0])"),
    (["ok", 7], f"{KEY}[1]: is int, not a namespace name"),
    (["kuberay-operator"], f"{KEY}[0]: 'kuberay-operator' is the KubeRay operator's namespace"),
    ([f"n{i}" for i in range(33)], f"{KEY}: has 33 entries; at most 32"),
])
def test_bad_lists_name_the_key_and_the_entry(value, expected):
    assert any(message.startswith(expected) for message in errors(value)), errors(value)


def test_hostile_text_is_refused_without_quoting_it_back_whole():
    assert errors(["a\ud800"]) == [f"{KEY}[0]: contains a control character or a lone surrogate (not valid text)"]
    assert errors(["ap\x00ps"]) == [f"{KEY}[0]: contains a control character or a lone surrogate (not valid text)"]
    (message,) = errors(["x" * 100_000])
    assert len(message) < 300 and message.startswith(f"{KEY}[0]:")


def test_the_json_api_takes_the_list_strictly():
    spec = DeploymentSpec.from_config({KEY: ["apps"]}, strict=True)
    assert spec.in_cluster_clients == ("apps",)
    with pytest.raises(SpecError):
        DeploymentSpec.from_config({KEY: "apps"}, strict=True)
