#!/bin/sh
# Make sure bubblewrap is installed, for the bwrap sandbox backend. Installs the Debian
# package `bubblewrap` with apt if `bwrap` is missing. Idempotent; silent when all is well.
set -eu

command -v bwrap >/dev/null 2>&1 && exit 0

SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
echo "ensure-bwrap: installing bubblewrap with apt" >&2
$SUDO apt-get update -qq >/dev/null
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq bubblewrap >/dev/null
command -v bwrap >/dev/null 2>&1 || { echo "ensure-bwrap: bwrap still missing after install" >&2; exit 1; }
