#!/bin/sh
# Make sure a Docker daemon answers, for the docker sandbox backend and its tests.
# Installs docker.io with apt if Docker is missing, starts the daemon (systemd if it runs,
# else dockerd in the background) if none answers, and waits for it. Idempotent; silent
# when all is well; says on stderr what it is doing otherwise.
set -eu

SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
LOG="${ASSAY_DOCKERD_LOG:-/tmp/assay-dockerd.log}"

answers() { docker version --format '{{.Server.Version}}' >/dev/null 2>&1; }

command -v docker >/dev/null 2>&1 && answers && exit 0

if ! command -v docker >/dev/null 2>&1 || ! command -v dockerd >/dev/null 2>&1; then
    echo "ensure-docker: installing docker.io with apt" >&2
    $SUDO apt-get update -qq >/dev/null
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq docker.io >/dev/null
fi
answers && exit 0

if [ -d /run/systemd/system ] && command -v systemctl >/dev/null 2>&1; then
    $SUDO systemctl start docker >/dev/null 2>&1 || true
fi
if ! answers; then
    echo "ensure-docker: starting dockerd in the background (log: $LOG)" >&2
    # setsid: the daemon must outlive this script and the make that called it.
    $SUDO sh -c "setsid dockerd >'$LOG' 2>&1 < /dev/null &"
fi

i=0
until answers; do
    i=$((i + 1))
    if [ "$i" -gt 120 ]; then
        echo "ensure-docker: dockerd did not answer within 60 s; see $LOG" >&2
        exit 1
    fi
    sleep 0.5
done
