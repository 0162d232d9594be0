# syntax=docker/dockerfile:1
# mcp-revision-gateway: small, non-root, health-checked.
#
#   docker build -t mcp-revision-gateway .
#   docker run -p 8080:8080 mcp-revision-gateway --listen 0.0.0.0:8080 \
#       --route /mcp=http://legacy-server:3000/mcp
#
# Everything else is configurable by environment (GATEWAY_ROUTES, GATEWAY_LOG_LEVEL,
# GATEWAY_LOG_FORMAT, GATEWAY_DRAIN_TIMEOUT, GATEWAY_CONFIG, ...): see
# config/gateway.example.toml, copied to /etc/gateway/.

FROM python:3.11-slim AS build
ENV PIP_NO_CACHE_DIR=1 PIP_DISABLE_PIP_VERSION_CHECK=1
WORKDIR /src
COPY pyproject.toml README.md ./
COPY gateway ./gateway
RUN python -m venv /opt/gateway \
    && /opt/gateway/bin/pip install '.[uvloop,cluster,otel]'

FROM python:3.11-slim
ENV PATH=/opt/gateway/bin:$PATH \
    PYTHONUNBUFFERED=1 \
    PYTHONDONTWRITEBYTECODE=1 \
    GATEWAY_LOG_FORMAT=json \
    GATEWAY_HEALTHCHECK_URL=http://127.0.0.1:8080/readyz
RUN useradd --system --uid 10001 --user-group --no-create-home --shell /usr/sbin/nologin gateway
COPY --from=build /opt/gateway /opt/gateway
COPY config/gateway.example.toml /etc/gateway/gateway.example.toml
USER 10001:10001
EXPOSE 8080
# SIGTERM drains the calls in flight (GATEWAY_DRAIN_TIMEOUT, 30 s by default): give
# `docker stop` / Kubernetes a longer grace period than that.
STOPSIGNAL SIGTERM
# Ready: every route's upstream answers and its protocol era is known (no curl in slim).
HEALTHCHECK --interval=15s --timeout=5s --start-period=10s --retries=3 \
    CMD ["python", "-c", "import os, urllib.request; urllib.request.urlopen(os.environ['GATEWAY_HEALTHCHECK_URL'], timeout=4)"]
ENTRYPOINT ["gateway", "serve"]
CMD ["--listen", "0.0.0.0:8080"]
