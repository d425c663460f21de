"""The store on both dialects (SQLite and PostgreSQL): the job state machine it enforces, the end
of a job written in one transaction, and the records the app keeps."""

from __future__ import annotations

import gzip
import json
import threading

import pytest

from webui import db
from webui.status import (
    ACTIVE,
    FINAL,
    TRANSITIONS,
    IllegalTransition,
    JobStatus,
    Operation,
    allowed_from,
)
from webui.store import AuditLine, NameTaken, Store, StoreError


@pytest.fixture
def store(make_store) -> Store:
    store = make_store()
    store.create_deployment("demo", "offline", {"a": 1}, {"gpus": 2})
    return store


def test_status_words_are_the_api_words():
    assert [status.value for status in JobStatus] == [
        "queued", "running", "succeeded", "failed", "cancelled", "interrupted"]
    assert JobStatus.RUNNING == "running" and f"{JobStatus.FAILED}" == "failed"
    assert {op.value for op in Operation} == {
        "preview", "up", "refresh", "destroy", "clear-pending", "preflight", "verify", "benchmark", "resilience",
        "conformance"}
    assert set(TRANSITIONS) == set(JobStatus)
    assert db.ACTIVE_WORDS == tuple(status.value for status in ACTIVE)  # the lock index's WHERE
    assert all(not TRANSITIONS[status] for status in FINAL if status is not JobStatus.INTERRUPTED)
    with pytest.raises(IllegalTransition):
        allowed_from(JobStatus.SUCCEEDED, [JobStatus.QUEUED])  # a job that never ran did not succeed


def test_a_job_moves_only_along_the_transition_table(store):
    job = store.create_job("demo", "up", "offline", "t", "updating")
    assert store.get_job(job)["status"] == "queued"
    assert not store.finish_job(job, "succeeded")  # queued -> succeeded is not a move
    assert store.get_job(job)["status"] == "queued" and store.events_after(job) == []
    assert store.set_job_running(job)
    assert not store.set_job_running(job)  # running -> running: no
    assert store.finish_job(job, "failed", error="boom")
    for later in ("succeeded", "cancelled", "interrupted"):
        assert not store.finish_job(job, later)  # an ended job stays ended
    assert not store.set_job_running(job)
    assert store.get_job(job)["status"] == "failed"
    with pytest.raises(ValueError):
        store.finish_job(job, "running")  # not a final status


def test_the_final_status_its_end_event_and_audit_line_are_one_commit(store):
    job = store.create_job("demo", "up", "offline", "alice", "updating")
    store.set_job_running(job)
    store.set_progress(job, 3, 5)
    seen: dict[str, object] = {}
    other = Store(store.path) if store.path is not None else Store(store.url)
    try:
        def peek() -> None:  # what another connection sees just before COMMIT: none of it
            seen["status"] = other.get_job(job)["status"]
            seen["events"] = other.events_after(job)
            seen["audit"] = other.audit_entries()

        assert store.finish_job(job, "succeeded", audit=AuditLine("alice", "up", "demo", "succeeded"),
                                before_commit=peek)
    finally:
        other.close()
    assert seen == {"status": "running", "events": [], "audit": []}
    end = store.events_after(job)[-1]
    assert end["kind"] == "end" and end["status"] == "succeeded"
    assert (end["done"], end["total"]) == (5, 5)  # a finished job is at 100 %
    assert store.get_job(job)["progress"] == {"done": 5, "total": 5}
    assert [(e["actor"], e["action"], e["result"]) for e in store.audit_entries()] == [("alice", "up", "succeeded")]
    assert store.get_deployment("demo")["lastResult"] == "succeeded"


def test_a_failing_end_leaves_the_job_running_and_writes_nothing(store):
    job = store.create_job("demo", "up", "offline", "t", "updating")
    store.set_job_running(job)

    def broken() -> None:
        raise OSError("disk I/O error")

    with pytest.raises(OSError):
        store.finish_job(job, "failed", error="x", audit=AuditLine("t", "up", "demo", "failed"),
                         before_commit=broken)
    assert store.get_job(job)["status"] == "running"
    assert store.events_after(job) == [] and store.audit_entries() == []


def test_restart_interrupts_leftovers_with_end_event_and_audit(store, make_store):
    job = store.create_job("demo", "up", "offline", "t", "updating")
    store.set_job_running(job)
    restarted = make_store()
    interrupted = restarted.interrupt_active_jobs(orphans_only=False)
    assert [j["id"] for j in interrupted] == [job] and interrupted[0]["status"] == "interrupted"
    assert restarted.get_deployment("demo")["status"] == "interrupted"
    end = restarted.events_after(job)[-1]
    assert end["kind"] == "end" and end["status"] == "interrupted" and "Close this job" in end["hint"]
    assert restarted.audit_entries()[0]["actor"] == "system"
    assert restarted.finish_job(job, "cancelled", from_statuses=("interrupted",), message="closed")
    assert restarted.events_after(job)[-1]["message"] == "closed"


def test_an_interrupted_benchmark_says_how_to_stop_its_kubernetes_job_not_to_refresh(store, make_store):
    job = store.create_job("demo", "benchmark", "pulumi", "t", "benchmarking")
    store.set_job_running(job)
    (interrupted,) = make_store().interrupt_active_jobs(orphans_only=False)
    assert "Refresh" not in interrupted["hint"] and "its results are lost" in interrupted["hint"]
    assert interrupted["hint"].endswith(f"kubectl delete job --all-namespaces -l raypd.io/benchmark=raypd-bench-{job}. "
                                        "Close this job to run another")


def test_events_get_one_sequence_per_job_even_from_many_threads(store):
    job = store.create_job("demo", "up", "offline", "t", "updating")
    seqs: list[int] = []
    lock = threading.Lock()

    def write() -> None:
        for _ in range(10):
            seq = store.add_event(job, {"kind": "diagnostic", "message": "x"})
            with lock:
                seqs.append(seq)

    threads = [threading.Thread(target=write) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    assert sorted(seqs) == list(range(1, 41))
    assert [e["seq"] for e in store.events_after(job, 35)] == [36, 37, 38, 39, 40]
    assert store.events_after(job, 2**63 - 1) == []  # the largest Last-Event-ID the API takes


def test_records_round_trip(store):
    with pytest.raises(NameTaken):
        store.create_deployment("demo", "offline", {}, {})
    store.update_deployment("demo", status="deployed", outputs={"modelId": "m"}, resources=[{"n": 1}])
    record = store.get_deployment("demo")
    assert (record["status"], record["config"], record["outputs"]) == ("deployed", {"a": 1}, {"modelId": "m"})
    assert [d["name"] for d in store.list_deployments()] == ["demo"]
    store.set_deployed_config("demo", {"v": 1})
    store.set_deployed_config("demo", {"v": 2})
    assert store.deployed_config("demo") == {"v": 2}
    store.save_check("demo", {"kind": "preflight", "checks": []}, None)
    store.save_check("demo", {"kind": "preflight", "checks": [1]}, "j1")
    assert store.last_checks("demo")["preflight"]["job"] == "j1"
    session = store.start_session()
    assert store.session_active(session, 60)
    store.end_session(session)
    assert not store.session_active(session, 60)
    store.delete_deployment("demo")
    assert store.get_deployment("demo") is None and store.last_checks("demo") == {}
    assert store.deployed_config("demo") is None


def test_resource_durations_come_from_succeeded_jobs(store):
    job = store.create_job("demo", "up", "pulumi", "t", "updating")
    store.set_job_running(job)
    store.add_event(job, {"kind": "resource", "state": "started", "name": "vpc", "type": "aws:ec2/vpc:Vpc"})
    store.add_event(job, {"kind": "resource", "state": "finished", "name": "vpc", "type": "aws:ec2/vpc:Vpc"})
    assert store.resource_durations("pulumi") == []
    store.finish_job(job, "succeeded")
    [(name, kind, seconds)] = store.resource_durations("pulumi")
    assert (name, kind) == ("vpc", "aws:ec2/vpc:Vpc") and seconds >= 0


def test_a_store_that_cannot_be_opened_says_what_to_do(tmp_path):
    broken = tmp_path / "raypd.db"
    broken.write_bytes(b"this is not a database" * 100)
    with pytest.raises(StoreError) as failure:
        Store(broken)
    assert "cannot open the job store" in str(failure.value) and ".broken" in str(failure.value)


def test_an_unreachable_database_says_so_without_its_password(tmp_path):
    with pytest.raises(StoreError) as failure:
        Store("postgresql://raypd:Sup3rSecretPassw0rd@127.0.0.1:1/raypd")
    message = str(failure.value)
    assert "Sup3rSecretPassw0rd" not in message and "RAYPD_DATABASE_URL" in message
    assert "raypd:***@127.0.0.1:1/raypd" in message


def test_benchmark_runs_keep_settings_summary_and_every_record(make_store):
    store = make_store()
    records = [{"index": i, "ttft_ms": 10.0 + i, "itl_ms": [1.5] * 300, "error": "caf\u00e9 \u2603"}
               for i in range(500)]
    store.save_benchmark("run-1", "disagg", "disagg (disaggregated) #run-1", "api-token@127.0.0.1",
                         {"rates": [1.0, 2.0], "mode": "disaggregated"}, {"requests": {"sent": 500}}, records)
    store.save_benchmark("run-2", "colo", "colo (colocated) #run-2", None, {"rates": [1.0]}, {"requests": {}}, [])
    assert [run["id"] for run in store.benchmark_runs()] == ["run-2", "run-1"]  # newest first
    (only,) = store.benchmark_runs("disagg")
    assert only["settings"] == {"rates": [1.0, 2.0], "mode": "disaggregated"} and only["actor"] == "api-token@127.0.0.1"
    assert store.benchmark_run("run-1")["summary"] == {"requests": {"sent": 500}}
    packed = store.benchmark_records("run-1")
    assert len(packed) < 60_000  # compressed: 500 records of 300 gaps are ~1 MB of JSON
    assert [json.loads(line) for line in gzip.decompress(packed).decode().splitlines()] == records
    assert store.benchmark_run("nope") is None and store.benchmark_records("nope") is None
    store.delete_deployment("disagg")  # a torn-down deployment's runs stay comparable
    assert store.benchmark_run("run-1") is not None


def test_latest_events_are_the_newest_in_order(store):
    job = store.create_job("demo", "benchmark", "pulumi", "t", "benchmarking")
    for number in range(30):
        store.add_event(job, {"kind": "benchmark", "message": f"{number}/30 requests"})
    newest = store.latest_events(job, limit=3)
    assert [e["message"] for e in newest] == ["27/30 requests", "28/30 requests", "29/30 requests"]
    assert [e["seq"] for e in newest] == [28, 29, 30]
