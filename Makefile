# The two commands a newcomer needs:  make run  (the web app)  and  make test  (every test).
# Both create .venv and install what is missing first, so a fresh clone needs nothing else.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python

.PHONY: run test test-fast real-vllm plan perf clean

$(VENV)/.installed: requirements.txt requirements-dev.txt
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --disable-pip-version-check -r requirements-dev.txt
	touch $@

run: $(VENV)/.installed
	$(PY) -m webui $(ARGS)

test: $(VENV)/.installed
	./scripts/ensure-chromium
	./scripts/ensure-postgresql
	./scripts/ensure-prometheus
	$(PY) -m ruff check .
	$(PY) -m mypy components serve webui perf
	$(PY) -m pytest -n 2 --dist loadgroup $(ARGS)

# Before every commit: lint, types and the tests that need no browser, subprocess-heavy scenario,
# real engine or tool install (the `slow` and `browser` markers); a few minutes on 2 cores.
test-fast: $(VENV)/.installed
	$(PY) -m ruff check .
	$(PY) -m mypy components serve webui perf
	RAYPD_SKIP_REAL_VLLM=1 $(PY) -m pytest -n 2 -m "not slow and not browser" $(ARGS)

# The real vLLM prefill/decode pair and Ray Serve LLM on CPU (tests/real): builds their own cached
# venv first (scripts/ensure-real-vllm; minutes once, seconds after), then runs only those tests.
# `make test` runs them too when that venv exists, and skips them saying how to get it otherwise.
real-vllm: $(VENV)/.installed
	./scripts/ensure-real-vllm
	$(PY) -m pytest tests/real $(ARGS)

plan: $(VENV)/.installed
	$(PY) -m components.plan --config Pulumi.dev.yaml

perf: $(VENV)/.installed
	$(PY) perf/plan_bench.py
	$(PY) perf/preflight_bench.py
	$(PY) perf/serving_time_bench.py
	$(PY) perf/list_bench.py
	$(PY) perf/benchmark_client_bench.py

clean:
	rm -rf $(VENV) test-artifacts .pytest_cache
