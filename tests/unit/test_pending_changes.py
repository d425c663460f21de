"""What is pending and what Discard can put back, as pure rules over two Contract 1 configs."""

from __future__ import annotations

from webui.pending_changes import (
    TOKEN_ADDED,
    TOKEN_REMOVED,
    TOKEN_REPLACED,
    discard_target,
    left_after_discard,
    pending_changes,
    settings_kind,
)

TOKEN = "raypd:hfToken"
DEPLOYED = {"aws:region": "us-east-2", "raypd:decode": {"replicas": 1, "tensorParallelSize": 1}, TOKEN: "[secret]"}


def test_rows_say_whose_settings_they_show():
    assert settings_kind("pulumi", deployed=True) == "deployed"
    assert settings_kind("offline", deployed=True) == "planned"
    assert settings_kind("offline", deployed=False) == settings_kind("pulumi", deployed=False) == "pending"


def test_nothing_is_pending_when_the_stack_runs_what_it_says():
    assert pending_changes(DEPLOYED, dict(DEPLOYED), flagged=False) == []


def test_a_nested_setting_is_named_with_its_dotted_key():
    grown = {**DEPLOYED, "raypd:decode": {"replicas": 2, "tensorParallelSize": 1}}
    assert pending_changes(DEPLOYED, grown, flagged=False) == [{"key": "raypd:decode.replicas", "old": 1, "new": 2}]


def test_a_replaced_token_is_pending_although_both_configs_say_secret():
    assert pending_changes(DEPLOYED, dict(DEPLOYED), flagged=True) == [
        {"key": TOKEN, "old": "[secret]", "new": "[secret]", "note": TOKEN_REPLACED}]
    assert left_after_discard(DEPLOYED, dict(DEPLOYED), flagged=True) == TOKEN_REPLACED
    assert discard_target(DEPLOYED, dict(DEPLOYED)) == DEPLOYED  # the spec keeps saying a token is set


def test_a_removed_token_cannot_be_claimed_back():
    current = {key: value for key, value in DEPLOYED.items() if key != TOKEN}
    assert pending_changes(DEPLOYED, current, flagged=False) == [
        {"key": TOKEN, "old": "[secret]", "new": None, "note": TOKEN_REMOVED}]
    assert TOKEN not in discard_target(DEPLOYED, current)
    assert left_after_discard(DEPLOYED, current, flagged=True) == TOKEN_REMOVED


def test_a_token_added_since_is_dropped_by_discard():
    before = {key: value for key, value in DEPLOYED.items() if key != TOKEN}
    changes = pending_changes(before, DEPLOYED, flagged=True)  # the flag means nothing without a deployed token
    assert changes == [{"key": TOKEN, "old": None, "new": "[secret]", "note": TOKEN_ADDED}]
    assert TOKEN not in discard_target(before, DEPLOYED)
    assert left_after_discard(before, DEPLOYED, flagged=True) is None


def test_the_token_entry_sorts_with_the_other_keys():
    grown = {**DEPLOYED, "raypd:decode": {"replicas": 2, "tensorParallelSize": 1}, "raypd:image": "x"}
    keys = [change["key"] for change in pending_changes(DEPLOYED, grown, flagged=True)]
    assert keys == sorted(keys) == ["raypd:decode.replicas", TOKEN, "raypd:image"]
