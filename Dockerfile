# The one image of the operator and the brokers: `stctl operator ...` and `stctl broker ...`
# (manifests/base). Build it from the repository root: `docker build -t scalable-topics:dev .`

# -- builder: a wheel of the package, installed with its server extras into a venv -------------
# Every dependency ships a binary wheel for CPython 3.11 on x86-64 Linux (pip installs them
# all with --only-binary :all:), so no compiler is installed here either; the venv is all
# that goes on to the final stage.
FROM python:3.11-slim-bookworm AS builder

ENV PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PIP_ROOT_USER_ACTION=ignore

WORKDIR /src
# Only what the wheel is built from (.dockerignore keeps the rest out of the context).
COPY pyproject.toml README.md ./
COPY operator ./operator

# `pip wheel .` builds in an isolated environment with the build-system requirements of
# pyproject.toml; the extras are named on the wheel's path, which the shell expands first.
RUN python -m venv /opt/scalable-topics \
    && python -m pip wheel --no-deps --wheel-dir /tmp/dist . \
    && wheel="$(echo /tmp/dist/scalable_topics-*.whl)" \
    && /opt/scalable-topics/bin/pip install --no-cache-dir "${wheel}[server,operator]"

# -- final: the interpreter of the same base image, the venv, nothing else ---------------------
# The same tag as the builder: the venv runs that image's /usr/local/bin/python3.11.
FROM python:3.11-slim-bookworm

# The venv's pip and setuptools are left as they are: removing them would save a few MB only.
ENV PATH=/opt/scalable-topics/bin:$PATH \
    PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1

COPY --from=builder /opt/scalable-topics /opt/scalable-topics

# A fixed numeric UID, so that Kubernetes can check runAsNonRoot and a volume's fsGroup
# matches. The brokers' segment logs and cursors live in /var/lib/scalable-topics (a volume in
# a cluster); nothing else in the image is writable by that user.
RUN groupadd --system --gid 10001 scalable-topics \
    && useradd --system --no-log-init --uid 10001 --gid 10001 \
        --home-dir /var/lib/scalable-topics --no-create-home --shell /usr/sbin/nologin \
        scalable-topics \
    && install --directory --owner 10001 --group 10001 --mode 0750 /var/lib/scalable-topics

USER 10001
WORKDIR /var/lib/scalable-topics

# Brokers (wire protocol, admin API, /metrics, /healthz), the operator's controller endpoint
# (/metrics, /readyz) and its liveness endpoint.
EXPOSE 6650 6651 8080

ENTRYPOINT ["stctl"]
CMD ["--help"]
