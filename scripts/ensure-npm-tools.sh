#!/usr/bin/env bash
# Third-party MCP clients the tests drive: MCP Inspector's CLI, installed once into PREFIX.
#   scripts/ensure-npm-tools.sh PREFIX
set -euo pipefail
PREFIX="${1:-.cache/npm}"
# Pinned: 0.17 is the first CLI that sends headers (the bearer token over HTTP); the
# unpinned install on Node 20 resolves to 0.15.
VERSION=0.17.5
installed=$(node -p "require('./$PREFIX/node_modules/@modelcontextprotocol/inspector/package.json').version" 2>/dev/null || true)
[ "$installed" = "$VERSION" ] && exit 0
command -v npm >/dev/null || {
    if [ "$(id -u)" -eq 0 ]; then
        DEBIAN_FRONTEND=noninteractive apt-get install -y -q nodejs npm >/dev/null
    else
        echo "ensure-npm-tools: npm is missing (fix: apt-get install nodejs npm)" >&2; exit 2
    fi
}
mkdir -p "$PREFIX"
npm install --silent --no-fund --no-audit --prefix "$PREFIX" "@modelcontextprotocol/inspector@$VERSION" >/dev/null 2>&1
