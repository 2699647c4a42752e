# twinaudit developer entry points. `make test` is the whole check CI runs.
PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed

.PHONY: test test-fast test-shuffled test-shuffled-record lint typecheck pytest bench vectors clean demo fuzz

# Create the virtual environment and install the project with exact pins. The hook's
# .pth line holds a compiled copy of wire/torchvision_finder.py: a change to either
# file installs it again.
$(STAMP): pyproject.toml constraints.txt wire/torchvision_hook.py wire/torchvision_finder.py
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade "pip>=24"
	$(BIN)/pip install --quiet -c constraints.txt -e '.[dev,ml,text,postgres,ops,formats,oip,completion]'
	# A plain `import transformers` in .venv then works too (wire/torchvision_hook.py).
	$(BIN)/python -m twinaudit.wire.torchvision_hook install
	touch $(STAMP)

test: $(STAMP) lint typecheck pytest

# ruff, then the layer contracts of pyproject.toml's [tool.importlinter] (docs/architecture.md).
lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/lint-imports --no-cache --no-logo

typecheck: $(STAMP)
	$(BIN)/mypy

pytest: $(STAMP)
	$(BIN)/python -m pytest -q

# Everyday work: the suite without the tests marked slow (CI runs everything: make test).
# It ends with the 30 longest tests (--durations) and names any unmarked test over 10 s
# (tests/support/slow_report.py), so that a test that grew slow shows.
test-fast: $(STAMP)
	$(BIN)/python -m pytest -q -m "not slow" --durations=30

# The whole suite in a random order (pytest-randomly; SEED=N repeats an order): a test
# that passes only in the file's order fails here (docs/development.md, "Flaky tests").
SEED ?= random
test-shuffled: $(STAMP)
	$(BIN)/python -m pytest -q -p randomly --randomly-seed=$(SEED) $(PYTEST_ARGS)

# RUNS whole-suite shuffled runs, each recorded in docs/results-data/shuffled-suite.jsonl
# (seed, counts, failed ids, times, load; scripts/shuffled_suite.py).
RUNS ?= 5
test-shuffled-record: $(STAMP)
	$(BIN)/python scripts/shuffled_suite.py --runs $(RUNS)

bench: $(STAMP)
	$(BIN)/python -m bench

# The fuzz suite at length: 50 times the examples `make pytest` runs (docs/development.md).
fuzz: $(STAMP)
	TWINAUDIT_FUZZ=long $(BIN)/python -m pytest -q tests/fuzz/test_fuzz_decoders.py tests/fuzz/test_fuzz_grpc.py

# The end-to-end Fashion-MNIST dispute (python -m demo --help; DEMO_ARGS=--quick for a smoke run).
demo: $(STAMP)
	$(BIN)/python -m demo $(DEMO_ARGS)

# Regenerate spec/vectors from the reference implementation (review the diff!).
vectors: $(STAMP)
	$(BIN)/python -m spec.tools.make_vectors

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache build *.egg-info
