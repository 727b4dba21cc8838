#!/usr/bin/env bash
# A real OpenAI-compatible server for the provider-brain test: llama-cpp-python's server.
# It builds from source (about 5 minutes on 2 cores), so the wheel is cached in WHEEL_CACHE
# and later installs take seconds.
#   scripts/ensure-llama-server.sh PIP WHEEL_CACHE
set -euo pipefail
PIP="${1:-.venv/bin/pip}"
CACHE="${2:-$HOME/.cache/assay/wheels}"
PY="$(dirname "$PIP")/python"
"$PY" -c "import llama_cpp.server" 2>/dev/null && exit 0
mkdir -p "$CACHE"
if ! ls "$CACHE"/llama_cpp_python-*.whl >/dev/null 2>&1; then
    echo "ensure-llama-server: building llama-cpp-python once (about 5 min on 2 cores), cached in $CACHE" >&2
    CMAKE_ARGS="-DGGML_NATIVE=OFF" "$PIP" wheel -q --no-deps -w "$CACHE" "llama-cpp-python>=0.3"
fi
"$PIP" install -q --find-links "$CACHE" "llama-cpp-python[server]>=0.3"
