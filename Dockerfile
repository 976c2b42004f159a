# One image for the web process and both workers; the compose file picks the command.
#   docker build -t foley .                                   (CPU torch)
#   docker build -t foley-gpu --build-arg TORCH_INDEX_URL=https://download.pytorch.org/whl/cu126 .
# (choose the CUDA build of torch that matches the GPU hosts' driver)
FROM python:3.11-slim-bookworm

ARG TORCH_INDEX_URL=https://download.pytorch.org/whl/cpu
ARG EXTRAS=worker

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    FOLEY_DATA_DIR=/data \
    MEDIA_ROOT=/data/media \
    STATIC_ROOT=/app/staticfiles

# libsndfile for soundfile; bubblewrap and libseccomp for the generator sandbox; espeak-ng for the
# built-in trapping sounds; util-linux brings setpriv, with which deploy/worker-entrypoint drops to
# the worker's user.
RUN apt-get update \
    && apt-get install -y --no-install-recommends libsndfile1 bubblewrap libseccomp2 util-linux curl espeak-ng \
    && rm -rf /var/lib/apt/lists/*

WORKDIR /app
COPY pyproject.toml README.md ./
COPY scripts/requirements.py scripts/requirements.py
RUN python -m pip install "torch==2.13.0" --index-url "$TORCH_INDEX_URL" \
    && python scripts/requirements.py "$EXTRAS" > /tmp/requirements.txt \
    && python -m pip install -r /tmp/requirements.txt \
    && python scripts/requirements.py --no-deps > /tmp/no-deps.txt \
    && if [ -s /tmp/no-deps.txt ]; then python -m pip install --no-deps -r /tmp/no-deps.txt; fi \
    && rm /tmp/requirements.txt /tmp/no-deps.txt

COPY . .
# A key of this build step alone (collectstatic signs nothing): production refuses a weak one.
RUN SECRET_KEY="$(python -c 'import secrets; print(secrets.token_urlsafe(50))')" \
    DEBUG=0 python manage.py collectstatic --no-input -v0 \
    && useradd --create-home --uid 1000 foley \
    && mkdir -p /data/media /data/static \
    && chown -R foley:foley /data

USER foley
EXPOSE 8000
# gunicorn's sync workers, WEB_CONCURRENCY of them (docs/deployment.md, "Web workers").
ENV WEB_CONCURRENCY=5
CMD ["gunicorn", "foley_platform.wsgi:application", "--bind", "0.0.0.0:8000", "--timeout", "120", "--access-logfile", "-"]
