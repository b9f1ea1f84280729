# tracegate: `docker build -t tracegate .`; runs `tracegate serve` by default,
# `docker run tracegate worker` for the queue worker.
ARG PYTHON_IMAGE=python:3.11-slim-bookworm

# --- build: the locked runtime dependencies and the project, into one virtualenv ------
FROM ${PYTHON_IMAGE} AS build
ENV PIP_NO_CACHE_DIR=1 PIP_DISABLE_PIP_VERSION_CHECK=1
RUN python -m venv /opt/tracegate
WORKDIR /src
# The lock alone first: this layer is rebuilt only when the dependencies change.
COPY requirements.lock ./
RUN /opt/tracegate/bin/pip install --require-hashes -r requirements.lock
COPY pyproject.toml README.md LICENSE ./
COPY bot ./bot
COPY graph ./graph
COPY gates ./gates
COPY sandbox ./sandbox
# --no-deps: nothing beyond the lock gets in (no dev extras, no unpinned versions).
RUN /opt/tracegate/bin/pip install --no-deps .

# --- runtime: no compiler, no pip cache, not root ---------------------------------------
FROM ${PYTHON_IMAGE}
RUN groupadd --system --gid 10001 tracegate \
    && useradd --system --uid 10001 --gid tracegate --no-create-home --home-dir /nonexistent tracegate
COPY --from=build /opt/tracegate /opt/tracegate
ENV PATH=/opt/tracegate/bin:$PATH \
    PYTHONUNBUFFERED=1 \
    PYTHONDONTWRITEBYTECODE=1 \
    PORT=3000
# The working directory holds no .env: settings come from the environment only.
WORKDIR /tmp
USER 10001:10001
EXPOSE 3000
ENTRYPOINT ["tracegate"]
CMD ["serve"]
