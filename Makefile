# a2annotate: `make run` serves the demo, `make test` runs the whole suite.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
# two stamps: what running needs (`make run`), and that plus the test extras (`make test`, `make install`)
RUN_STAMP := $(VENV)/.installed-run
STAMP := $(VENV)/.installed
HOST ?= 127.0.0.1
PORT ?= 8000
DEMO_RUNS ?= 300
export DATABASE_URL ?= sqlite:///./a2annotate.db

.PHONY: install run test test-fast bench bench-scale lint clean chromium

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip

$(RUN_STAMP): pyproject.toml | $(BIN)/python
	$(BIN)/pip install --quiet -e .
	touch $(RUN_STAMP)

$(STAMP): $(RUN_STAMP) pyproject.toml
	$(BIN)/pip install --quiet -e '.[test]'
	touch $(STAMP)

## install: the app with the test extras (what `make test` and development use)
install: $(STAMP)

## run: install what running needs, migrate, load the demo corpus into SQLite, serve on 127.0.0.1:$(PORT)
run: $(RUN_STAMP)
	$(BIN)/a2annotate db upgrade
	$(BIN)/a2annotate demo --runs $(DEMO_RUNS) --with-users
	$(BIN)/a2annotate serve --host $(HOST) --port $(PORT)

## chromium: the headless browser the end-to-end test drives (Debian's package)
chromium:
	@command -v chromium >/dev/null 2>&1 || (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null)

## test: install and run the whole suite (SQLite and PostgreSQL)
test: install chromium
	$(BIN)/python -m pytest -n 2 --dist loadgroup -q

test-fast: install
	$(BIN)/python -m pytest -n 2 --dist loadgroup -q -m "not e2e"

## bench: speed and memory benchmarks, written to bench/RESULTS.md
bench: install
	$(BIN)/python -m bench.run

## bench-scale: the team deployment at scale (2 app processes, 2 workers, Redis; SQLite and PostgreSQL,
## 2,500 and 25,000 runs; BENCH_SCALE_SIZES etc., see bench/bench_scale.py); replaces "## Scale" in bench/RESULTS.md
bench-scale: install
	$(BIN)/python -m bench.bench_scale --write

lint: install
	$(BIN)/ruff check app tests bench

clean:
	rm -rf $(VENV) a2annotate.db a2annotate.db-wal a2annotate.db-shm .pytest_cache
