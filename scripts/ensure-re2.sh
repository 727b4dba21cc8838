#!/bin/sh
# Make sure RE2's headers and library are there, so re2bulk's library builds (policies/redaction/re2*.cpp):
# redaction's detectors then run natively on long texts, their whole-text passes on a second
# core. Installs Debian's libre2-dev with apt if the header is missing, then builds the library
# into the environment assay is installed in, with its SHA-256 beside it: the gateway loads only
# that build, checked (policies/redaction/re2bulk.py). Without them redaction still works, in
# Python (the same findings, slower): this warns and goes on rather than failing the install.
set -eu
PY="${1:-python3}"

if [ ! -f /usr/include/re2/re2.h ]; then
  SUDO=""
  if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
  echo "ensure-re2: installing libre2-dev with apt" >&2
  if ! { $SUDO apt-get update -qq >/dev/null && DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq libre2-dev >/dev/null; }; then
    echo "ensure-re2: could not install libre2-dev; redaction will run in Python (slower)" >&2
    exit 0
  fi
fi
"$PY" -c "from assay.policies.redaction import re2bulk; print(re2bulk.build())" >/dev/null || echo "ensure-re2: the re2bulk build failed; redaction will run in Python (slower)" >&2
