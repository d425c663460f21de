"""The offline plan's emulation of Pulumi's replace-or-update decision, held to its sources:
pulumi-kubernetes `convertPatchToDiff` (element-wise arrays, leaf paths, bracketed keys) and the
engine's `applyReplaceOnChanges` with `PropertyPath.Contains`."""

from __future__ import annotations

import pytest

from components.changes.pulumi_diff import (
    as_sets,
    contains,
    detailed_diff,
    format_path,
    parse_path,
    replace_paths,
)


def test_paths_print_like_pulumi_kubernetes_and_parse_back():
    parts = ["metadata", "annotations", "raypd.io/ray-cluster-digest"]
    assert format_path(parts) == 'metadata.annotations["raypd.io/ray-cluster-digest"]'
    assert format_path(["spec", "groups", 0, "replicas"]) == "spec.groups[0].replicas"
    for text in ('metadata.annotations["raypd.io/ray-cluster-digest"]', "a.b[3].c", 'a["x\\"y"]'):
        assert format_path(parse_path(text)) == text
    assert parse_path("a[*].b") == ["a", "*", "b"]
    assert parse_path('a["x\\"y"]') == ["a", 'x"y']


def test_arrays_are_compared_element_by_element_with_adds_and_deletes_at_the_end():
    old = {"groups": [{"name": "a", "replicas": 1}]}
    grown = {"groups": [{"name": "a", "replicas": 2}, {"name": "b", "replicas": 1}]}
    assert detailed_diff(old, grown) == {"groups[0].replicas": "update", "groups[1]": "add"}
    assert detailed_diff(grown, old) == {"groups[0].replicas": "update", "groups[1]": "delete"}
    assert detailed_diff(old, old) == {}


def test_a_replace_path_contains_the_paths_at_or_below_it_only():
    assert contains(parse_path("spec.rayClusterConfig"), parse_path("spec.rayClusterConfig.a[0].b"))
    assert contains(parse_path("spec.workers[*].template"), parse_path("spec.workers[3].template.x"))
    assert not contains(parse_path("spec.workers[*].template"), parse_path("spec.workers[3]"))
    assert not contains(parse_path("spec.rayClusterConfig"), parse_path("spec.serveConfigV2"))
    assert not contains(parse_path("a[0]"), parse_path("a.x"))


@pytest.mark.parametrize("new_digest,replaced", [("aaaa", False), ("bbbb", True)])
def test_an_annotation_path_replaces_only_when_that_annotation_changes(new_digest, replaced):
    trigger = 'metadata.annotations["raypd.io/ray-cluster-digest"]'
    old = {"metadata": {"annotations": {"raypd.io/ray-cluster-digest": "aaaa"}}, "spec": {"n": 1}}
    new = {"metadata": {"annotations": {"raypd.io/ray-cluster-digest": new_digest}}, "spec": {"n": 2}}
    assert bool(replace_paths(old, new, [trigger])) is replaced


def test_set_typed_inputs_compare_equal_in_any_order():
    old, new = {"subnetIds": ["b", "a"], "x": [2, 1]}, {"subnetIds": ["a", "b"], "x": [1, 2]}
    assert set(detailed_diff(as_sets(old, ["subnetIds"]), as_sets(new, ["subnetIds"]))) == {"x[0]", "x[1]"}


@pytest.mark.parametrize(("old", "new", "deleted"), [
    ({"spec": {"a": 1, "b": 2}}, {"spec": {"a": 1}}, "spec.b"),
    ({"spec": {"rayClusterConfig": {"workerGroupSpecs": [{"groupName": "decode",
                                                          "rayStartParams": {"resources": "x"}}]}}},
     {"spec": {"rayClusterConfig": {"workerGroupSpecs": [{"groupName": "decode", "rayStartParams": {}}]}}},
     "spec.rayClusterConfig.workerGroupSpecs[0].rayStartParams.resources"),
    ({"metadata": {"annotations": {"raypd.io/ray-cluster-digest": "x"}}}, {"metadata": {"annotations": {}}},
     'metadata.annotations["raypd.io/ray-cluster-digest"]'),
])
def test_a_map_key_removed_under_a_replace_path_is_a_delete_that_replaces(old, new, deleted):
    # pulumi-kubernetes's convertPatchToDiff reports a key missing from the new map as a DELETE at
    # its path; under a replaceOnChanges path that is a replacement, never "no change".
    assert detailed_diff(old, new) == {deleted: "delete"}
    assert replace_paths(old, new, [deleted.split(".")[0].split("[")[0]]) == [deleted]
    assert replace_paths(new, old, [deleted.split(".")[0].split("[")[0]]) == [deleted]  # and added back
