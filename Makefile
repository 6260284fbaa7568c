# trainperf: the two commands a newcomer needs.
#   make demo   set up, then run the mini suite (one quick run per benchmark): results table and report
#   make test   set up, then run the tests (what CI runs)
VENV ?= .venv
OUT  ?= trainperf-results

.PHONY: setup demo test lint clean

setup:
	bash scripts/setup.sh

demo: setup
	$(VENV)/bin/trainperf run all --scale mini --out $(OUT)
	$(VENV)/bin/trainperf report $(OUT) -o $(OUT)/report.html --markdown $(OUT)/report.md

test: setup
	$(VENV)/bin/python -m pytest tests

lint: setup
	$(VENV)/bin/ruff check trainperf tests benchmarks

clean:
	rm -rf $(OUT) .pytest_cache
