"""serve.kube's Secret calls against the Kubernetes stand-in: merge patches, resourceVersion
preconditions, and the bounded retry that keeps two writers from losing each other's change."""

from __future__ import annotations

import base64
from typing import Any, Iterator, Optional

import pytest

from serve.kube import KubeClient, KubeConflict, KubeError, KubeNotFound, client_from_kubeconfig
from tests.fakes.kube_api import FakeKubeApi

NS, NAME = "inference", "ray-llm-api-keys"
VALUE = "rpd_value-that-must-never-be-shown-0123456789"


def b64(text: str) -> str:
    return base64.b64encode(text.encode()).decode()


@pytest.fixture
def kube() -> Iterator[FakeKubeApi]:
    with FakeKubeApi("healthy") as fake:
        fake.put_secret(NS, NAME, {"default": VALUE}, {"raypd.io/created-default": "2026-12-01T12:00:00Z"})
        yield fake


@pytest.fixture
def client(kube: FakeKubeApi) -> KubeClient:
    return client_from_kubeconfig(kube.kubeconfig())


def test_get_secret_returns_the_object_and_an_absent_one_is_not_found(kube, client):
    secret = client.get_secret(NS, NAME)
    assert secret["data"] == {"default": b64(VALUE)}
    assert secret["metadata"]["resourceVersion"]
    with pytest.raises(KubeNotFound):
        client.get_secret(NS, "nope")


def test_a_merge_patch_adds_and_a_null_deletes_keys_and_annotations(kube, client):
    version = client.get_secret(NS, NAME)["metadata"]["resourceVersion"]
    written = client.patch_secret(NS, NAME, {"data": {"ci": b64("k2")},
                                             "metadata": {"annotations": {"raypd.io/created-ci": "t"}}}, version)
    assert written["metadata"]["resourceVersion"] != version
    assert kube.secret_data(NS, NAME) == {"default": VALUE, "ci": "k2"}
    client.patch_secret(NS, NAME, {"data": {"default": None},
                                   "metadata": {"annotations": {"raypd.io/created-default": None}}})
    assert kube.secret_data(NS, NAME) == {"ci": "k2"}
    assert kube.secret(NS, NAME)["metadata"]["annotations"] == {"raypd.io/created-ci": "t"}
    assert {p["contentType"] for p in kube.secret_patches} == {"application/merge-patch+json"}


def test_a_stale_resource_version_is_a_conflict_and_changes_nothing(kube, client):
    version = client.get_secret(NS, NAME)["metadata"]["resourceVersion"]
    client.patch_secret(NS, NAME, {"data": {"a": b64("1")}}, version)
    with pytest.raises(KubeConflict) as caught:
        client.patch_secret(NS, NAME, {"data": {"default": None}}, version)
    assert caught.value.status == 409 and "changed by someone else" in str(caught.value)
    assert set(kube.secret_data(NS, NAME)) == {"default", "a"}


def test_modify_secret_reads_again_after_losing_a_race_and_keeps_both_changes(kube, client):
    raced: list[bool] = []

    def other_writer() -> None:  # someone else adds a key between our read and our write, once
        if not raced:
            raced.append(True)
            other = client_from_kubeconfig(kube.kubeconfig())
            current = other.get_secret(NS, NAME)
            other.patch_secret(NS, NAME, {"data": {"other": b64("o")}}, current["metadata"]["resourceVersion"])

    kube.before_secret_patch = other_writer
    seen: list[set[str]] = []

    def add_mine(secret: dict[str, Any]) -> Optional[dict[str, Any]]:
        seen.append(set(secret.get("data") or {}))
        return {"data": {"mine": b64("m")}}

    client.modify_secret(NS, NAME, add_mine)
    assert set(kube.secret_data(NS, NAME)) == {"default", "other", "mine"}
    assert seen == [{"default"}, {"default", "other"}]  # recomputed from what the winner wrote
    assert [p["status"] for p in kube.secret_patches] == [200, 409, 200]


def test_modify_secret_gives_up_after_a_bounded_number_of_conflicts(kube, client):
    def always_first() -> None:
        kube.put_secret(NS, NAME, {"default": VALUE})  # a new resourceVersion every time

    kube.before_secret_patch = always_first
    with pytest.raises(KubeConflict, match="kept changing under 3 attempts"):
        client.modify_secret(NS, NAME, lambda secret: {"data": {"x": b64("x")}}, attempts=3)
    assert len(kube.secret_patches) == 3


def test_modify_secret_writes_nothing_when_the_change_is_none(kube, client):
    client.modify_secret(NS, NAME, lambda secret: None)
    assert kube.secret_patches == []


def test_errors_name_the_secret_and_never_its_values(kube, client):
    kube.secrets_refused = 403
    with pytest.raises(KubeError) as caught:
        client.patch_secret(NS, NAME, {"data": {"new": b64(VALUE)}})
    assert caught.value.status == 403 and VALUE not in str(caught.value)
    kube.secrets_refused = None
    with pytest.raises(KubeNotFound, match=f"the Secret {NS}/gone does not exist"):
        client.patch_secret(NS, "gone", {"data": {"new": b64(VALUE)}})
    with pytest.raises(KubeError) as invalid:
        client.patch_secret(NS, NAME, {"data": {"bad key!": b64(VALUE)}})
    assert invalid.value.status == 422 and VALUE not in str(invalid.value)
