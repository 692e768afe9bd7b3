# Quick start: `make run` (normalise example mentions and link an example text with the embedded default), `make test`.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin

.PHONY: run test bench pack

# `make run` installs what running needs; `make test` adds the test extras (spaCy, Ray, Selenium, …).
$(BIN)/babelink: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e .
	touch $@

$(VENV)/.test-extras: $(BIN)/babelink
	$(BIN)/python -m pip install --quiet -e '.[test]'
	touch $@

run: $(BIN)/babelink
	$(BIN)/babelink normalize "infarto de miocardio" "heart attack" "hypertension artérielle" "paracetamol" --top-k 3
	$(BIN)/babelink link "El paciente tiene diabetes mellitus tipo 2 e hipertensión arterial."

test: $(VENV)/.test-extras
	$(BIN)/ruff check .
	$(BIN)/python -m pytest

bench: $(VENV)/.test-extras
	$(BIN)/python benchmarks/normalization.py

# The GPU training job's input (docs/training.md): about 2.5 minutes on 2 cores, never committed. It carries
# the wheels of the pure-Python libraries it reads KBs and documents with, which the GPU machine lacks.
PACK_WHEELS := build/pack-wheels
pack: $(BIN)/babelink
	rm -rf $(PACK_WHEELS)
	$(BIN)/python -m pip download --quiet --no-deps --only-binary :all: -d $(PACK_WHEELS) \
		$$($(BIN)/python -m pip freeze | grep -iE '^(abbreviations|stopwordsiso|langcodes)==')
	$(BIN)/babelink train pack --data ../shared/data --out pack $$(for w in $(PACK_WHEELS)/*.whl; do echo --wheel $$w; done)
