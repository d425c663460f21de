"""serve.benchmark.schedule and .trace: parsing (errors name the step or line and the field) and
the send times they give, computed by hand; then a schedule sent to the fake OpenAI server on
127.0.0.1, counted per step by what the server received."""

from __future__ import annotations

import asyncio
import json
import math
import random
from pathlib import Path

import pytest

from serve.benchmark.__main__ import main
from serve.benchmark.loadgen import LoadConfig, run_load
from serve.benchmark.schedule import Schedule, ScheduleError, Step, arrivals, from_document, parse_inline
from serve.benchmark.summary import step_stats
from serve.benchmark.trace import TraceError, parse_lines, trace_workload
from serve.benchmark.workload import RequestSpec
from tests.fakes.openai_server import OpenAIServer
from tests.patience import PATIENCE_S


def test_the_inline_form_reads_steps_ramps_units_and_the_end():
    schedule = parse_inline("0s:1, 1m:8, 3m:1->4, 0.1h:end")
    assert schedule == Schedule((Step(0, 1), Step(60, 8), Step(180, 1, 4)), 360)
    assert schedule.inline() == "0s:1,60s:8,180s:1->4,360s:end"
    assert parse_inline(schedule.inline()) == schedule  # what the Job sends the pod reads back the same
    assert parse_inline("0:2,30:0", end=90) == Schedule((Step(0, 2), Step(30, 0)), 90)  # --duration as the end


def test_a_file_schedule_is_the_same_schedule_and_duration_cuts_a_ramp_at_its_slope():
    document = {"steps": [{"at": "0s", "rate": 1}, {"at": 60, "rate": 8}, {"at": "3m", "rate": 1, "to": 4}],
                "end": "360s"}
    schedule = from_document(document, "--schedule-file s.yaml")
    assert schedule == parse_inline("0s:1,60s:8,180s:1->4,360s:end")
    cut = schedule.until(270)  # half way up the 1 -> 4 ramp
    assert cut == Schedule((Step(0, 1), Step(60, 8), Step(180, 1, 2.5)), 270)


@pytest.mark.parametrize("text,message", [
    ("", "step 1 ('') must be AT:RATE"),
    ("5s:1,10s:end", "step 1 must start at 0s"),
    ("0s:1,10s:x,20s:end", "step 2 ('10s:x') rate must be a number"),
    ("0s:1,10s:-2,20s:end", "step 2 ('10s:-2') rate must be a number"),
    ("0s:1,10s:20000,20s:end", "step 2 ('10s:20000') rate must be between 0 and 10000 requests/s"),
    ("0s:1,10s:nan,20s:end", "step 2 ('10s:nan') rate must be a number"),
    ("0s:1,10s:\u0662,20s:end", "step 2 ('10s:\u0662') rate must be a number"),  # Arabic-Indic 2
    ("0s:1,\u0661\u0660s:2,20s:end", "at must be a time like 60s"),
    ("0s:1,10s:2->y,20s:end", "step 2 ('10s:2->y') ramp end must be a number"),
    ("0s:1,soon:2,20s:end", "step 2 ('soon:2') at must be a time like 60s"),
    ("0s:1,10s:2,10s:3,20s:end", "step 3 at must be later than step 2's"),
    ("0s:1,10s:end,20s:2", "step 3 ('20s:2'): nothing may follow the `end` entry"),
    ("0s:1,10s:2", "needs an end"),
    ("0s:1,10s:2,5s:end", "end (5s) must be later than the last step's start (10s)"),
])
def test_a_bad_inline_schedule_names_the_step_and_the_field(text, message):
    with pytest.raises(ScheduleError) as caught:
        parse_inline(text)
    assert message in str(caught.value) and str(caught.value).startswith("--schedule")


@pytest.mark.parametrize("document,message", [
    ([1, 2], "must be a mapping with `steps`"),
    ({"steps": [], "end": 10, "ramp": 1}, "unknown key 'ramp'"),
    ({"steps": "0s:1"}, "steps must be a list"),
    ({"steps": [{"at": 0}], "end": 10}, "steps[0].rate is required"),
    ({"steps": [{"at": 0, "rate": 1}, {"at": 5, "rate": True}], "end": 10}, "steps[1].rate must be a number"),
    ({"steps": [{"at": 0, "rate": 1, "too": 2}], "end": 10}, "steps[0]: unknown key 'too'"),
    ({"steps": [{"at": 0, "rate": 1, "to": "fast"}], "end": 10}, "steps[0].to must be a number"),
    ({"steps": [{"at": 0, "rate": -1}], "end": 10}, "steps[0].rate must be between 0 and"),
    ({"steps": [{"at": -5, "rate": 1}], "end": 10}, "steps[0].at must be between 0 and"),
    ({"steps": [{"at": 0, "rate": 1}], "end": "later"}, "end must be a time"),
])
def test_a_bad_schedule_file_names_the_field(document, message):
    with pytest.raises(ScheduleError) as caught:
        from_document(document, "--schedule-file s.yaml")
    assert message in str(caught.value)


def test_uniform_arrivals_give_each_step_its_rate_times_its_length_away_from_the_boundaries():
    schedule = parse_inline("0s:2,5s:6,10s:0,12s:0->4,14s:end")
    offsets = arrivals(schedule, "uniform")
    per_step = [sum(schedule.step_at(t) == i for t in offsets) for i in range(4)]
    assert per_step == [10, 30, 0, 4]
    assert offsets[:2] == pytest.approx([0.25, 0.75]) and offsets[10] == pytest.approx(5 + 1 / 12)
    # The ramp's k-th send is where 0 + 4/2 u^2 / 2 reaches k - 1/2: u = sqrt(k - 1/2).
    assert offsets[40:] == pytest.approx([12 + math.sqrt(k - 0.5) for k in range(1, 5)])


def test_poisson_arrivals_are_the_time_rescaled_unit_process():
    schedule = parse_inline("0s:2,5s:6,10s:end")
    rng, mass, expected = random.Random(7), 0.0, []
    while True:
        mass += rng.expovariate(1.0)
        if mass >= 40:
            break
        expected.append(mass / 2 if mass < 10 else 5 + (mass - 10) / 6)
    assert arrivals(schedule, "poisson", seed=7) == pytest.approx(expected)
    counts = [sum(schedule.step_at(t) == i for t in arrivals(schedule, "poisson", seed=s)) for s in range(200)
              for i in range(2)]
    assert sum(counts[0::2]) / 200 == pytest.approx(10, rel=0.1)
    assert sum(counts[1::2]) / 200 == pytest.approx(30, rel=0.1)


def test_arrivals_stop_at_the_limit():
    assert len(arrivals(parse_inline("0s:100,10s:end"), "uniform", limit=7)) == 7


def test_a_trace_is_read_in_time_order_and_its_lengths_become_the_requests():
    lines = ['{"at_s": 2.5, "input_tokens": 3, "output_tokens": 5, "id": "b"}', "",
             '{"at_s": 0, "prompt": "hello there", "output_tokens": 1}',
             '{"at_s": 2.5, "input_tokens": 4, "output_tokens": 2}']
    trace = parse_lines(lines)
    assert [(r.at_s, r.output_tokens, r.trace_id) for r in trace] == [(0, 1, None), (2.5, 5, "b"), (2.5, 2, None)]
    offsets, specs = trace_workload(trace)
    assert offsets == [0, 2.5, 2.5]
    assert [(s.index, s.input_tokens, s.max_tokens) for s in specs] == [(0, 2, 1), (1, 3, 5), (2, 4, 2)]
    assert specs[0].prompt == "hello there"


@pytest.mark.parametrize("line,message", [
    ("[1, 2]", "line 2: must be a JSON object"),
    ("{oops", "line 2: not JSON"),
    ('{"at_s": NaN, "input_tokens": 1, "output_tokens": 1}', "line 2: not JSON"),
    ('{"input_tokens": 1, "output_tokens": 1}', "line 2: at_s must be a number"),
    ('{"at_s": -1, "input_tokens": 1, "output_tokens": 1}', "line 2: at_s must be a number"),
    ('{"at_s": "1", "input_tokens": 1, "output_tokens": 1}', "line 2: at_s must be a number"),
    ('{"at_s": 1, "input_tokens": 1}', "line 2: output_tokens is required"),
    ('{"at_s": 1, "input_tokens": 0, "output_tokens": 1}', "line 2: input_tokens must be an integer"),
    ('{"at_s": 1, "input_tokens": 2.5, "output_tokens": 1}', "line 2: input_tokens must be an integer"),
    ('{"at_s": 1, "output_tokens": 1}', "line 2: input_tokens is required (or a prompt)"),
    ('{"at_s": 1, "prompt": "", "output_tokens": 1}', "line 2: prompt must be a non-empty string"),
    ('{"at_s": 1, "input_token": 5, "output_tokens": 1}', "line 2: unknown field 'input_token'"),
    ('{"at_s": 1, "input_tokens": 5, "output_tokens": 1, "id": 7}', "line 2: id must be a string"),
])
def test_a_bad_trace_line_names_its_line_and_field(line, message):
    with pytest.raises(TraceError) as caught:
        parse_lines(['{"at_s": 0, "input_tokens": 1, "output_tokens": 1}', line])
    assert str(caught.value).startswith("--trace " + message)


def test_an_empty_trace_is_refused():
    with pytest.raises(TraceError, match="no requests"):
        parse_lines(["", "  "])


def test_a_schedule_sent_to_a_local_server_arrives_step_by_step():
    """Uniform sends at 2/s for 2 s, then 5/s for 2 s, then a pause: the server receives 4, then 10,
    then nothing, counted on its own clock (the same perf_counter, same process) against the
    client's start. Each send is half a gap away from a step boundary (>= 100 ms). A late event loop
    can only move a send later, and the client's own record says by how much (sent_s - scheduled_s):
    on a busy machine one was 936 ms late and landed in the next step. So every request the client
    sent on time (< 100 ms late) must land in its own step on the server's clock, none may arrive
    before it was due, and the steps by schedule must hold 4, 10 and 0."""
    schedule = parse_inline("0s:2,2s:5,4s:0,4.5s:end")
    offsets = arrivals(schedule, "uniform")
    specs = [RequestSpec(i, f"request {i}", 2, 2) for i in range(len(offsets))]
    with OpenAIServer("m", output_tokens=2) as server:
        config = LoadConfig(server.url, "m", connect_timeout_s=PATIENCE_S, max_in_flight=64)
        records = asyncio.run(run_load(config, specs, offsets=offsets))
        received = {stream.request["messages"][0]["content"]: stream.received_s for stream in server.streams}
    assert all(r["ok"] for r in records) and len(records) == len(offsets) == 14
    # The client's start on perf_counter: each request reached the server after t0 + its sent_s, so
    # the smallest difference is t0 plus one loopback trip (well under a millisecond).
    t0 = min(received[f"request {r['index']}"] - r["sent_s"] for r in records)
    due = [sum(schedule.step_at(r["scheduled_s"]) == i for r in records) for i in range(3)]
    assert due == [4, 10, 0], f"the schedule's sends per step: {due}"
    on_time = [r for r in records if r["sent_s"] - r["scheduled_s"] < 0.1]
    assert on_time, "the client's event loop was late for every send: nothing left to judge"
    for r in records:
        at = received[f"request {r['index']}"] - t0
        assert at >= r["scheduled_s"] - 0.001, f"request {r['index']} arrived {at:.3f} s, due {r['scheduled_s']} s"
        if r in on_time:
            assert schedule.step_at(at) == schedule.step_at(r["scheduled_s"]), (r, at)
    assert [s["requests"]["sent"] for s in step_stats(records, schedule)] == [4, 10, 0]
    assert [s["offered_rate"] for s in step_stats(records, schedule)] == [2, 5, 0]


def test_run_with_a_schedule_file_and_a_trace_writes_the_steps_and_says_replicas_were_not_sampled(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    schedule_file = tmp_path / "s.yaml"
    schedule_file.write_text("steps:\n  - {at: 0s, rate: 8}\n  - {at: 0.5s, rate: 0}\nend: 1s\n", encoding="utf-8")
    trace = tmp_path / "t.jsonl"
    trace.write_text('{"at_s": 0.1, "input_tokens": 4, "output_tokens": 2, "id": "x1"}\n'
                     '{"at_s": 0, "prompt": "hi", "output_tokens": 3}\n', encoding="utf-8")
    with OpenAIServer("m", output_tokens=3) as server:
        base = ["run", "--endpoint", server.url, "--model", "m", "--json"]
        assert main([*base, "--schedule-file", str(schedule_file), "--arrivals", "uniform",
                     "--input-tokens", "4", "--output-tokens", "2", "--out", str(tmp_path / "s")]) == 0
        assert main([*base, "--trace", str(trace), "--out", str(tmp_path / "t")]) == 0
    scheduled = json.loads((tmp_path / "s" / "summary.json").read_text(encoding="utf-8"))
    assert [s["requests"]["sent"] for s in scheduled["schedule"]["steps"]] == [4, 0]
    assert scheduled["load"] == {"schedule": "0s:8,0.5s:0,1s:end", "arrivals": "uniform", "max_in_flight": 512}
    assert scheduled["replicas"] == {"sampled": False, "why": "no --dashboard given"}
    replayed = json.loads((tmp_path / "t" / "summary.json").read_text(encoding="utf-8"))
    assert replayed["requests"]["completed"] == 2 and replayed["load"]["trace"] == str(trace)
    records = [json.loads(line) for line in (tmp_path / "t" / "requests.jsonl").read_text().splitlines()]
    assert [(r["scheduled_s"], r["max_tokens"], r.get("trace_id")) for r in records] == [(0, 3, None), (0.1, 2, "x1")]


@pytest.mark.parametrize("args,message", [
    (["--schedule", "0s:1,5s:x,9s:end"], "--schedule step 2 ('5s:x') rate must be a number"),
    (["--schedule", "0s:1"], "--schedule needs an end"),
    (["--rate", "1"], "--requests is required with --rate"),
    (["--rate", "1", "--requests", "2", "--dashboard", "http://h:8265"], "--dashboard goes with --schedule"),
    (["--trace", "t.jsonl", "--input-tokens", "5"], "--trace gives each request's lengths"),
    (["--schedule", "0s:1000,100s:end"], "cap it with --requests"),
    (["--schedule", "0s:1000,60s:end", "--preset", "rag"], "requests x 8192 input tokens is more than 50000000"),
])
def test_bad_load_arguments_exit_2_naming_them(args, message, tmp_path, capsys):
    assert main(["run", "--endpoint", "http://127.0.0.1:9", "--model", "m", *args, "--out", str(tmp_path)]) == 2
    assert message in capsys.readouterr().err


def test_max_in_flight_holds_a_due_request_until_a_slot_frees_and_says_so():
    """6 requests due within 0.5 s, each answered after >= 3 s, at most 2 in flight: the first two
    go at once, every later one was due while two were in flight (only an event loop stalled for
    2.5 s could see a slot free; with answers after 1.5 s a busy machine's 1 s stall did), so it
    waited for one (held_by_cap) and went late."""
    schedule = parse_inline("0s:12,0.5s:end")
    offsets = arrivals(schedule, "uniform")
    specs = [RequestSpec(i, f"request {i}", 2, 1) for i in range(len(offsets))]
    with OpenAIServer("m", ttft_s=3.0, output_tokens=1) as server:
        config = LoadConfig(server.url, "m", connect_timeout_s=PATIENCE_S, max_in_flight=2)
        records = asyncio.run(run_load(config, specs, offsets=offsets))
    assert len(records) == 6 and all(r["ok"] for r in records)
    assert [r["held_by_cap"] for r in records] == [False, False] + [True] * 4
    ends = sorted(r["end_s"] for r in records)
    for number, record in enumerate(records[2:]):  # the k-th held one went after the k-th answer ended
        assert record["sent_s"] >= ends[number] and record["sent_s"] - record["scheduled_s"] > 2.0
    events = sorted([(r["sent_s"], 1) for r in records] + [(r["end_s"], -1) for r in records],
                    key=lambda e: (e[0], e[1]))
    assert max(sum(step for _, step in events[:i + 1]) for i in range(len(events))) == 2
