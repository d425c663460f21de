"""JSON Merge Patch (webui.merge_patch): the examples of RFC 7396 Appendix A, and that neither
argument is changed (the store's record is the target)."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from webui.merge_patch import merge_patch

# RFC 7396 Appendix A, "Example Test Cases": (original, patch, result).
APPENDIX_A: list[tuple[Any, Any, Any]] = [
    ({"a": "b"}, {"a": "c"}, {"a": "c"}),
    ({"a": "b"}, {"b": "c"}, {"a": "b", "b": "c"}),
    ({"a": "b"}, {"a": None}, {}),
    ({"a": "b", "b": "c"}, {"a": None}, {"b": "c"}),
    ({"a": ["b"]}, {"a": "c"}, {"a": "c"}),
    ({"a": "c"}, {"a": ["b"]}, {"a": ["b"]}),
    ({"a": {"b": "c"}}, {"a": {"b": "d", "c": None}}, {"a": {"b": "d"}}),
    ({"a": [{"b": "c"}]}, {"a": [1]}, {"a": [1]}),
    (["a", "b"], ["c", "d"], ["c", "d"]),
    ({"a": "b"}, ["c"], ["c"]),
    ({"a": "foo"}, None, None),
    ({"a": "foo"}, "bar", "bar"),
    ({"e": None}, {"a": 1}, {"e": None, "a": 1}),
    ([1, 2], {"a": "b", "c": None}, {"a": "b"}),
    ({}, {"a": {"bb": {"ccc": None}}}, {"a": {"bb": {}}}),
]


@pytest.mark.parametrize("original,patch,result", APPENDIX_A)
def test_the_examples_of_rfc_7396_appendix_a(original, patch, result):
    assert merge_patch(original, patch) == result


def test_a_nested_object_keeps_the_sub_keys_the_patch_leaves_out():
    current = {"raypd:decode": {"instanceType": "g6.12xlarge", "replicas": 1, "tensorParallelSize": 2}}
    assert merge_patch(current, {"raypd:decode": {"replicas": 3}}) == {
        "raypd:decode": {"instanceType": "g6.12xlarge", "replicas": 3, "tensorParallelSize": 2}}


def test_neither_argument_is_changed():
    current = {"raypd:decode": {"instanceType": "g6.12xlarge", "replicas": 1}, "raypd:image": "x"}
    patch = {"raypd:decode": {"replicas": None}, "raypd:image": None}
    before = (copy.deepcopy(current), copy.deepcopy(patch))
    merge_patch(current, patch)
    assert (current, patch) == before
