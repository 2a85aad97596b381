# gpu-governor: `docker build -t gpu-governor .` then
#   docker run -p 8000:8000 -v governor-data:/data gpu-governor
# The operator token is printed once at first start unless GOVERNOR_OPERATOR_TOKEN is set.
FROM python:3.11-slim

ENV PYTHONUNBUFFERED=1 \
    PYTHONDONTWRITEBYTECODE=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1

# The dependencies first, each at the version the runtime lock pins (`make lock` writes it): the
# governor's own, the aws extra (EC2 stops are signed by boto3), the gcp extra (google-auth's
# credentials), the kubernetes extra (kubeconfigs and the in-cluster service account), the focus
# extra (the FOCUS export as Parquet, through pyarrow) and the oidc extra (sign-in through an
# OpenID Connect provider, through authlib).
COPY requirements/runtime.txt /tmp/runtime.txt
RUN pip install -r /tmp/runtime.txt && rm /tmp/runtime.txt
# Then the package alone, from a scratch copy of the source, and drop the copy.
COPY pyproject.toml README.md /tmp/src/
COPY governor /tmp/src/governor
RUN pip install --no-deps /tmp/src && rm -rf /tmp/src

# The migrations are not part of the installed package: ship them and say where they are.
COPY migrations /opt/gpu-governor/migrations
ENV GOVERNOR_MIGRATIONS_DIR=/opt/gpu-governor/migrations

# A non-root user, and a volume for the embedded SQLite database.
RUN groupadd --system --gid 10001 governor \
    && useradd --system --uid 10001 --gid governor --home-dir /data --no-create-home \
       --shell /usr/sbin/nologin governor \
    && mkdir /data && chown governor:governor /data
ENV GOVERNOR_DATABASE_URL=sqlite:////data/governor.db
VOLUME ["/data"]
WORKDIR /data
USER 10001:10001

EXPOSE 8000
# Liveness only (the process answers); slim images have no curl.
HEALTHCHECK --interval=30s --timeout=5s --start-period=20s --retries=3 \
    CMD ["python", "-c", "import urllib.request; urllib.request.urlopen('http://127.0.0.1:8000/healthz', timeout=4)"]
CMD ["governor", "serve", "--host", "0.0.0.0", "--port", "8000"]
