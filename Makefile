# Set-up commands for a fresh machine with only Python 3.11: each target installs what it needs into .venv.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin

.PHONY: run test bench readme venv clean

$(BIN)/activate:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip

$(VENV)/.installed-test: $(BIN)/activate pyproject.toml
	$(BIN)/pip install -q -e ".[test,plot]"
	touch $@

venv: $(VENV)/.installed-test

## run: noise calibration on the built-in demo configuration (prints sigma, overall delta, samples, time)
run: venv
	$(BIN)/mcacct calibrate

## test: the whole test suite, on two worker processes (pytest-xdist, a test file per worker at a time)
test: venv
	$(BIN)/python -m pytest -q -n 2 --dist loadfile

## bench: throughput against the CPU reference (writes benchmarks/results/)
bench: venv
	$(BIN)/python benchmarks/throughput.py

## readme: rewrite README's benchmark tables from benchmarks/results/*.json (standard library only; --check: diff)
readme:
	$(PYTHON) benchmarks/readme_tables.py

clean:
	rm -rf $(VENV) .pytest_cache build *.egg-info
