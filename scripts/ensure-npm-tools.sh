#!/usr/bin/env bash
# Third-party MCP clients the tests drive: MCP Inspector's CLI, installed once into PREFIX.
#   scripts/ensure-npm-tools.sh PREFIX
set -euo pipefail
PREFIX="${1:-.cache/npm}"
[ -x "$PREFIX/node_modules/.bin/mcp-inspector" ] && exit 0
command -v npm >/dev/null || {
    if [ "$(id -u)" -eq 0 ]; then
        DEBIAN_FRONTEND=noninteractive apt-get install -y -q nodejs npm >/dev/null
    else
        echo "ensure-npm-tools: npm is missing (fix: apt-get install nodejs npm)" >&2; exit 2
    fi
}
mkdir -p "$PREFIX"
npm install --silent --no-fund --no-audit --prefix "$PREFIX" @modelcontextprotocol/inspector >/dev/null
