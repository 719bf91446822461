# The lab's two entry points (see README):
#   make lab    set up .venv if missing, then open JupyterLab on the notebooks (127.0.0.1, token auth on)
#   make test   set up .venv if missing, then run the whole test suite (notebooks included; in a real Chromium too)
#               on two pytest-xdist workers (pyproject's addopts; README "Two commands" lists the layers' markers)
#   make app    the playground alone as a web page (Voila, code hidden) on 127.0.0.1, for projecting in a lecture
# The other targets run the lab's command line, python -m labkit <command> (python -m labkit lists the commands).
PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed

.PHONY: lab test app venv html html-full bench models results clean-build

$(STAMP): pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet torch==2.13.0       # first, pinned: an unpinned torch pulls GBs of CUDA wheels
	$(PY) -m pip install --quiet -e ".[test]"
	touch $(STAMP)

venv: $(STAMP)

# jupyter/labconfig/default_setting_overrides.json (the lab's own JupyterLab defaults, added to the config path;
# a user's settings still win): no "get notified about official Jupyter news?" prompt over the first figures.
lab: $(STAMP)
	JUPYTER_CONFIG_PATH="$(CURDIR)/jupyter$${JUPYTER_CONFIG_PATH:+:$$JUPYTER_CONFIG_PATH}" $(VENV)/bin/jupyter lab --ip=127.0.0.1 --notebook-dir=notebooks $(if $(filter 0,$(shell id -u)),--allow-root)

test: $(STAMP)
	$(PY) -m pytest

# Voila runs notebooks/app_playground.ipynb and serves its outputs only: sliders and "run live" work, no code shows.
app: $(STAMP)
	$(VENV)/bin/voila notebooks/app_playground.ipynb --Voila.ip=127.0.0.1 --token

html: $(STAMP)
	$(PY) -m labkit notebooks html

# full mode (longer runs, every sweep at full size): build/html-full/, about 11 minutes on 2 quiet cores
html-full: $(STAMP)
	$(PY) -m labkit notebooks html --full

bench: $(STAMP)
	$(PY) -m labkit bench

# Rebuild the shipped models (each MODEL_CARD.md gives its wall time on 2 cores and the exact command).
# Four stages each: 4.0 M tokens, then the budget extended to 5.2 M, 7.2 M and 8.1 M (each command resumes from the
# previous one's checkpoint); default's later stages train one fixed 50 % draft path, stage 3 also on the full
# model's own greedy continuations, stage 4 (constant lr, AdamW's moments reset) adds a top-1 term and stops at the
# step whose snapshot agreed best on development prompts (see data/models/default/MODEL_CARD.md). plain sees the
# same tokens and stages.
DRAFT_PATH := attention=1,4,5,7;mlp=1,3,5,6
STAGE4     := --token-budget 8089600 --lr 2e-4 --min-lr-ratio 1.0 --fresh-optimizer-at 3539
models: $(STAMP)
	$(PY) -m labkit train --name default
	$(PY) -m labkit train --name default --token-budget 5200000 --draft-skip "$(DRAFT_PATH)" --draft-skip-prob 0.75
	$(PY) -m labkit train --name default --token-budget 7247872 --draft-skip "$(DRAFT_PATH)" --draft-skip-prob 1.0 \
	  --greedy-tail 64
	$(PY) -m labkit train --name default $(STAGE4) --draft-skip "$(DRAFT_PATH)" --draft-skip-prob 1.0 \
	  --greedy-tail 128 --top1-weight 1.0
	$(PY) -m labkit train-draft-head --model default
	$(PY) -m labkit train --name plain --recipe plain
	$(PY) -m labkit train --name plain --recipe plain --token-budget 5200000
	$(PY) -m labkit train --name plain --recipe plain --token-budget 7247872
	$(PY) -m labkit train --name plain --recipe plain $(STAGE4)
	$(PY) -m labkit train --name draft --recipe plain --n-layers 2 --hidden-size 192 --intermediate-size 512 \
	  --token-budget 2400000 --batch-size 8 --warmup-steps 150

# Regenerate everything in data/ that is measured from the models (about an hour on 2 cores). The search prices
# whole draft configurations on the choosing prompts of every source (labkit/search/objectives.py, `priced`).
SOURCES := stdlib packages stdlib-long packages-long
results: $(STAMP)
	for m in default plain; do \
	  $(PY) -m labkit robustness --model $$m && \
	  $(PY) -m labkit search --model $$m --objective priced --trials 100 --sources $(SOURCES) && \
	  $(PY) -m labkit search --model $$m --objective priced --per-bucket --trials 25 --sources $(SOURCES) && \
	  $(PY) -m labkit search final --model $$m --objective priced && \
	  $(PY) -m labkit search export --model $$m --objective priced && \
	  $(PY) -m labkit grid --model $$m || exit 1; \
	done
	$(PY) -m labkit bench

clean-build:
	rm -rf build
