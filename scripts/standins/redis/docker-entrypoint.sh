#!/bin/sh
# The official build turns protected mode off (other containers connect); Debian's keeps it on.
set -eu
if [ "${1:-}" = redis-server ]; then
  shift
  exec redis-server --protected-mode no "$@"
fi
exec "$@"
