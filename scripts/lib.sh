# Shared steps of scripts/demo and scripts/test: a virtual environment with what the project
# needs, and the local services when this machine has them.

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
VENV=${FOLEY_VENV:-$ROOT/.venv}
PY=$VENV/bin/python

say() { printf '\033[1m==> %s\033[0m\n' "$*" >&2; }

ensure_python() {
  PYTHON=${PYTHON:-python3}
  if ! command -v "$PYTHON" >/dev/null; then
    echo "Python 3.11 or newer is needed (python3 not found)." >&2; exit 1
  fi
  if ! "$PYTHON" -c 'import sys; sys.exit(sys.version_info < (3, 11))'; then
    echo "Python 3.11 or newer is needed; found $("$PYTHON" --version)." >&2; exit 1
  fi
}

# Installs into .venv: torch first (the CPU build where one is offered; set TORCH_INDEX_URL to
# choose, e.g. https://download.pytorch.org/whl/cpu), then everything pyproject.toml lists.
ensure_venv() {
  local extras=${1:-worker,dev}
  ensure_python
  if [ ! -x "$PY" ]; then
    say "Creating a virtual environment in $VENV"
    "$PYTHON" -m venv "$VENV"
  fi
  # One record for every command: the pyproject's hash and the extras installed so far. A
  # command asking for extras already there installs nothing, whichever ran first.
  local stamp="$VENV/.foley-deps"
  local hash have=""
  hash="$(sha256sum < "$ROOT/pyproject.toml" | cut -c1-16)"
  if [ -f "$stamp" ] && [ "$(cut -d' ' -f1 < "$stamp")" = "$hash" ]; then
    have="$(cut -s -d' ' -f2 < "$stamp")"
    local missing=0 extra
    for extra in ${extras//,/ }; do
      [[ ",$have," == *",$extra,"* ]] || missing=1
    done
    if [ "$missing" = 0 ]; then
      return
    fi
    extras="$(printf '%s\n' ${have//,/ } ${extras//,/ } | sort -u | paste -sd, -)"
  fi
  say "Installing dependencies (first run only)"
  "$PY" -m pip install -q --upgrade pip
  if ! "$PY" -c 'import torch' 2>/dev/null && [[ $extras == *worker* ]]; then
    if [ -n "${TORCH_INDEX_URL:-}" ]; then
      "$PY" -m pip install -q "torch==2.13.0" --index-url "$TORCH_INDEX_URL"
    else
      "$PY" -m pip install -q "torch==2.13.0"
    fi
  fi
  local reqs nodeps
  mapfile -t reqs < <("$PY" "$ROOT/scripts/requirements.py" "$extras")
  mapfile -t nodeps < <("$PY" "$ROOT/scripts/requirements.py" --no-deps)
  "$PY" -m pip install -q "${reqs[@]}"
  if [ "${#nodeps[@]}" -gt 0 ]; then
    "$PY" -m pip install -q --no-deps "${nodeps[@]}"
  fi
  echo "$hash $extras" > "$stamp"
}

pg_up() { "$PY" - <<'PYEOF' 2>/dev/null
import psycopg2, sys
try:
    psycopg2.connect(host="127.0.0.1", port=5432, user="postgres", dbname="postgres", connect_timeout=2).close()
except Exception:
    sys.exit(1)
PYEOF
}

redis_up() { "$PY" -c 'import redis, sys; sys.exit(not redis.Redis(host="127.0.0.1", port=6379, socket_timeout=2).ping())' 2>/dev/null; }

# Starts PostgreSQL and Redis where they are installed but not running.
start_services() {
  if ! pg_up && command -v pg_ctlcluster >/dev/null; then
    say "Starting PostgreSQL"
    pg_ctlcluster --skip-systemctl-redirect "$(ls /etc/postgresql | head -n1)" main start || true
    for _ in $(seq 1 20); do pg_up && break; sleep 0.5; done
  fi
  if ! redis_up && command -v redis-server >/dev/null; then
    say "Starting Redis"
    redis-server --daemonize yes --bind 127.0.0.1 --port 6379 --save "" --appendonly no || true
    for _ in $(seq 1 20); do redis_up && break; sleep 0.5; done
  fi
}

# bubblewrap, which isolates submitted generator code (libseccomp comes with Debian), where the
# machine allows installing it; without it the sandbox refuses to run submitted code.
ensure_bubblewrap() {
  if command -v bwrap >/dev/null; then
    return
  fi
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
    say "Installing bubblewrap for the generator sandbox"
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq bubblewrap libseccomp2 >/dev/null
  else
    say "bubblewrap is not installed: sandbox tests will be skipped (apt-get install bubblewrap)"
  fi
}

# nginx for the test that runs deploy/nginx.conf in front of the web process (raters' sounds
# by X-Accel-Redirect), where the machine allows installing it.
ensure_nginx() {
  if command -v nginx >/dev/null || [ -x /usr/sbin/nginx ]; then
    return
  fi
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
    say "Installing nginx for the proxy test"
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq nginx-light >/dev/null \
      || DEBIAN_FRONTEND=noninteractive apt-get install -y -qq nginx >/dev/null
  else
    say "nginx is not installed: the proxy test will be skipped (apt-get install nginx)"
  fi
}

# Debian's chromium for the browser tests, where the machine allows installing it.
ensure_chromium() {
  if command -v chromium >/dev/null || command -v chromium-browser >/dev/null; then
    return
  fi
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
    say "Installing chromium for the browser tests"
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null
  else
    say "chromium is not installed: browser tests will be skipped (apt-get install chromium)"
  fi
}

# espeak-ng, the speech synthesiser of the built-in trapping sounds (spoken instructions such as
# "set both sliders to two"), where the machine allows installing it.
ensure_espeak() {
  if command -v espeak-ng >/dev/null; then
    return
  fi
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
    say "Installing espeak-ng for the built-in trapping sounds"
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq espeak-ng >/dev/null
  else
    say "espeak-ng is not installed: the trapping-sound tests will be skipped (apt-get install espeak-ng)"
  fi
}
