#!/usr/bin/env bash
# Set up trainperf on a fresh Debian machine: Debian packages for the mini data, a virtual environment
# with the tested stack (constraints.txt), and the mini datasets (checksummed). Idempotent: a second run
# changes nothing.
set -euo pipefail
cd "$(dirname "$0")/.."

VENV=${VENV:-.venv}
PYTHON=${PYTHON:-python3}
# libjpeg-dev: the headers resnet's compiled window decoder (trainperf/workloads/resnet/_window.c) builds against
DEB_PACKAGES="dataset-fashion-mnist gnugo dict-gcide wordnet-base python3-doc espeak-ng flite libjpeg-dev manpages manpages-dev"

missing=""
for p in $DEB_PACKAGES; do
  dpkg -s "$p" >/dev/null 2>&1 || missing="$missing $p"
done
if [ -n "$missing" ]; then
  echo "setup: installing Debian packages:$missing"
  SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq $missing >/dev/null
fi

if [ ! -x "$VENV/bin/python" ]; then
  echo "setup: creating virtual environment $VENV"
  "$PYTHON" -m venv "$VENV"
fi
stamp="$VENV/.trainperf-installed"
# pyproject.toml holds compatible ranges (a user's own torch stays); constraints.txt the exact tested versions,
# which set-up and CI install. Any of them, setup.py or the compiled part's source newer than the stamp means a
# re-install (which rebuilds the compiled part in place), as does a checkout without the built part.
built() { compgen -G "trainperf/workloads/resnet/_window*.so" >/dev/null; }
if [ ! -f "$stamp" ] || [ pyproject.toml -nt "$stamp" ] || [ constraints.txt -nt "$stamp" ] \
  || [ setup.py -nt "$stamp" ] || [ trainperf/workloads/resnet/_window.c -nt "$stamp" ] || ! built; then
  echo "setup: installing trainperf and the tested versions of its dependencies (constraints.txt)"
  "$VENV/bin/python" -m pip install -q --upgrade pip
  "$VENV/bin/python" -m pip install -q -c constraints.txt -e ".[test]"
  touch "$stamp"
fi

"$VENV/bin/trainperf" data prepare
