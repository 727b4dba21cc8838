#!/usr/bin/env bash
# A throwaway PostgreSQL server for the test suite (never for real data: fsync is off).
#
#   scripts/pg-test-server.sh install        install Debian's postgresql if no server binaries
#   scripts/pg-test-server.sh start [DIR]    init a cluster in DIR (default: a new /tmp dir),
#                                            listen on 127.0.0.1:<free port>, print its URL
#   scripts/pg-test-server.sh url DIR        print the URL of the cluster in DIR
#   scripts/pg-test-server.sh stop DIR       stop it and remove what start made
#
# The pytest fixture (tests/ledger/conftest.py) starts and stops its own server when
# ASSAY_TEST_PG_URL is unset, so `make test` only needs `install`. To share one server:
#   export ASSAY_TEST_PG_URL="$(scripts/pg-test-server.sh start /tmp/assay-pg)"
set -euo pipefail
cd "$(dirname "$0")/.."
PY="${PYTHON:-.venv/bin/python}"
[ -x "$PY" ] || PY=python3

have_server() { ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 || command -v initdb >/dev/null 2>&1; }

install() {
    have_server && return 0
    if [ "$(id -u)" -eq 0 ]; then SUDO=""; elif command -v sudo >/dev/null; then SUDO="sudo"; else
        echo "pg-test-server: PostgreSQL is not installed and I am not root (fix: apt-get install postgresql)" >&2
        exit 2
    fi
    $SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends postgresql >/dev/null \
        || { $SUDO apt-get update -q >/dev/null && $SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends postgresql >/dev/null; }
    have_server || { echo "pg-test-server: postgresql installed but no initdb found" >&2; exit 1; }
}

case "${1:-}" in
    install) install ;;
    start) install; exec "$PY" -m assay.ledger.pgtest start ${2:+"$2"} ;;
    url|stop) exec "$PY" -m assay.ledger.pgtest "$1" ${2:+"$2"} ;;
    *) sed -n '2,12p' "$0" >&2; exit 2 ;;
esac
