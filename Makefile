# Two commands for a fresh clone: `make demo` and `make test`.
# Each creates .venv on first use and installs what it needs from PyPI.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

SUDO := $(shell [ "$$(id -u)" = 0 ] || echo sudo) env DEBIAN_FRONTEND=noninteractive

.PHONY: demo test lint bench redis-server

$(STAMP): setup.cfg pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e ".[test,bench]"
	touch $(STAMP)

demo: $(STAMP)
	cd example_project && ../$(BIN)/python -m robots_demo $(SITE)

lint: $(STAMP)
	$(BIN)/ruff check scrapy_robots_coccoc tests benchmarks example_project

# The distributed tests start a real Redis server; Debian's, installed here when missing.
redis-server:
	@command -v redis-server >/dev/null || $(SUDO) apt-get install -y -qq redis-server >/dev/null 2>&1 \
		|| { $(SUDO) apt-get update -qq && $(SUDO) apt-get install -y -qq redis-server >/dev/null; } \
		|| echo "redis-server could not be installed: the Redis tests will be skipped"

test: lint redis-server
	$(BIN)/python -m pytest

bench: $(STAMP)
	$(BIN)/python benchmarks/parser_bench.py
	$(BIN)/python benchmarks/origin_memory.py
	$(BIN)/python benchmarks/crawl_bench.py
	$(BIN)/python benchmarks/redis_bench.py
