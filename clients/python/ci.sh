#!/usr/bin/env bash
# The Python client's tests: a venv cached outside the repo (keyed by Python and the pinned
# versions, like scripts/ci-install.sh's), the package installed with its test dependencies, pytest.
#   bash clients/python/ci.sh [PYTEST ARGS…]
# Exits non-zero when a test fails, and when pytest collected no test (its exit 5).
set -euo pipefail
HERE="$(cd "$(dirname "$0")" && pwd)"
ROOT="$(cd "$HERE/../.." && pwd)"
PYTHON="${PYTHON:-python3}"
command -v "$PYTHON" >/dev/null || { echo "clients/python/ci.sh: $PYTHON is required" >&2; exit 1; }

PYTEST_VERSION=9.2.0
BOTO3_VERSION=1.43.11
BOTOCORE_VERSION=1.43.127
PYYAML_VERSION=6.0.4
SETUPTOOLS_VERSION=84.2.1
PYVER="$("$PYTHON" -c 'import sys; print("%d.%d" % sys.version_info[:2])')"
KEY="py${PYVER}-pytest${PYTEST_VERSION}-boto3${BOTO3_VERSION}-botocore${BOTOCORE_VERSION}-pyyaml${PYYAML_VERSION}-setuptools${SETUPTOOLS_VERSION}"
VENV="${GANTRY_CACHE:-$HOME/.cache/gantry}/venv-python-client-${KEY}"

if [ -x "$VENV/bin/python" ] && [ -f "$VENV/.complete" ]; then
  echo "python client venv: cached in $VENV"
else
  rm -rf "$VENV"
  "$PYTHON" -m venv "$VENV"
  "$VENV/bin/python" -m pip install --quiet --disable-pip-version-check \
    "pytest==${PYTEST_VERSION}" "boto3==${BOTO3_VERSION}" "botocore==${BOTOCORE_VERSION}" "PyYAML==${PYYAML_VERSION}" \
    "setuptools==${SETUPTOOLS_VERSION}"
  touch "$VENV/.complete"
  echo "python client venv: created $VENV"
fi
# The package changes with the tree: installed again each run, from a clean build/ (a stale one
# could keep a removed module), offline (its build backend is in the venv; it has no dependencies).
rm -rf "$HERE/build"
"$VENV/bin/python" -m pip install --quiet --disable-pip-version-check --no-deps --no-build-isolation \
  --force-reinstall "$HERE"

cd "$HERE"
set +e
"$VENV/bin/python" -m pytest -p no:cacheprovider "$@"
code=$?
set -e
if [ "$code" -eq 5 ]; then
  echo "clients/python/ci.sh: pytest collected no tests" >&2
  exit 1
fi
exit "$code"
