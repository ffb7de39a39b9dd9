# pytriton: a Triton-compatible inference server for Python callables.
#   docker build -t pytriton .
#   docker run --rm --shm-size=1g -p 8000:8000 -p 8001:8001 -p 8002:8002 pytriton
# serves the example model (examples/add_sub.py). A model of your own: mount or COPY its module into /models and
# give its `pytriton serve` arguments as the command, e.g.
#   docker run --rm --shm-size=1g -p 8000-8002:8000-8002 -v "$PWD/mymodels:/models:ro" pytriton \
#       mymod:infer_fn --instances 2
# (a module that declares its model with @triton_model; otherwise add --input/--output NAME:DTYPE:SHAPE flags)
# See docs/guide/deployment.md.
FROM python:3.12-slim

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1

# The package (its dependencies all have binary wheels: no compiler needed).
WORKDIR /opt/pytriton
COPY pyproject.toml setup.cfg README.md ./
COPY pytriton ./pytriton
RUN pip install --no-cache-dir . && rm -rf /opt/pytriton

# The health check (standard library only: slim images have no curl).
COPY deploy/healthcheck.py /usr/local/bin/pytriton-healthcheck

# A user without privileges; models are imported from /models (the working directory is on the import path).
RUN groupadd --system --gid 10001 pytriton \
    && useradd --system --uid 10001 --gid 10001 --no-create-home --shell /usr/sbin/nologin pytriton
WORKDIR /models
COPY --chown=root:root examples ./examples
USER 10001:10001

# HTTP, gRPC, metrics (Triton's ports).
EXPOSE 8000 8001 8002

HEALTHCHECK --interval=10s --timeout=5s --start-period=60s --retries=3 \
    CMD ["python", "/usr/local/bin/pytriton-healthcheck"]

# The latency summaries and the first-response histogram (decoupled models) feed the dashboard's percentiles
# (deploy/grafana/pytriton.json); a later `--metrics-config summary_latencies=false` in the command turns one off.
ENTRYPOINT ["pytriton", "serve", "--metrics-config", "summary_latencies=true", \
            "--metrics-config", "histogram_latencies=true"]
# The example declares its tensors and batching next to the callable (@triton_model), so it needs no flags.
CMD ["examples.add_sub:add_sub"]
