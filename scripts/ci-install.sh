#!/usr/bin/env bash
# Installs what the tiers beyond unit tests need, caching slow builds outside the repo.
#   scripts/ci-install.sh              everything
#   scripts/ci-install.sh quick        cfn-lint, boto3, moto, Chromium, KServe's CRD (seconds when cached)
#   scripts/ci-install.sh go [SETS]    the real control planes from the Go module proxy: the light
#                                      tier, then the heavy tier for the version sets SETS
#                                      (e.g. v2.3,v2.1; default all); .ci/run runs it in the background
set -euo pipefail
cd "$(dirname "$0")/.."
WHAT="${1:-all}"

install_go() {
  bash scripts/realcp-build.sh
  # heavy tier (KCM, scheduler, kwok, JobSet, Trainer, Kueue, scheduler-plugins), cached outside the repo
  bash scripts/realcp-heavy-build.sh --sets "${1:-all}"
}
if [ "$WHAT" = go ]; then
  install_go "${2:-all}"
  exit 0
fi

# cfn-lint (deploy tier: `npm run cfn-lint`), pinned, from PyPI into a venv cached outside the repo.
# deploy/serverless/cfn-lint.sh finds it there by the same version.
CFN_LINT_VERSION="${CFN_LINT_VERSION:-1.58.0}"
CFN_LINT_VENV="${GANTRY_CACHE:-$HOME/.cache/gantry}/venv-cfn-lint-${CFN_LINT_VERSION}"
if [ -x "$CFN_LINT_VENV/bin/cfn-lint" ] && [ "$("$CFN_LINT_VENV/bin/cfn-lint" --version)" = "cfn-lint ${CFN_LINT_VERSION}" ]; then
  echo "cfn-lint ${CFN_LINT_VERSION}: cached in $CFN_LINT_VENV"
else
  command -v python3 >/dev/null || { echo "python3 is required to install cfn-lint" >&2; exit 1; }
  rm -rf "$CFN_LINT_VENV"
  python3 -m venv "$CFN_LINT_VENV"
  "$CFN_LINT_VENV/bin/python" -m pip install --quiet --disable-pip-version-check "cfn-lint==${CFN_LINT_VERSION}"
  echo "cfn-lint: $("$CFN_LINT_VENV/bin/cfn-lint" --version) installed in $CFN_LINT_VENV"
fi
# boto3 (integration tier: README's metric-channel Python snippet runs unchanged), pinned, from PyPI
# into a venv cached outside the repo; test/integration/metric-channel.test.ts finds it by version.
BOTO3_VERSION="${BOTO3_VERSION:-1.43.11}"
BOTO3_VENV="${GANTRY_CACHE:-$HOME/.cache/gantry}/venv-boto3-${BOTO3_VERSION}"
if [ -x "$BOTO3_VENV/bin/python" ] && "$BOTO3_VENV/bin/python" -c "import boto3, sys; sys.exit(boto3.__version__ != '${BOTO3_VERSION}')"; then
  echo "boto3 ${BOTO3_VERSION}: cached in $BOTO3_VENV"
else
  rm -rf "$BOTO3_VENV"
  python3 -m venv "$BOTO3_VENV"
  "$BOTO3_VENV/bin/python" -m pip install --quiet --disable-pip-version-check "boto3==${BOTO3_VERSION}"
  echo "boto3 ${BOTO3_VERSION} installed in $BOTO3_VENV"
fi
# moto's server (deploy tier: `serverless deploy`/`remove` of the packaged stack and the packaged bundles
# under each function's own IAM role, on 127.0.0.1), pinned, from PyPI into a venv cached outside the repo;
# test/helpers/moto.ts finds it there by the same version.
MOTO_VERSION="${MOTO_VERSION:-5.2.6}"
MOTO_VENV="${GANTRY_CACHE:-$HOME/.cache/gantry}/venv-moto-${MOTO_VERSION}"
if [ -x "$MOTO_VENV/bin/moto_server" ] && "$MOTO_VENV/bin/python" -c "import moto, sys; sys.exit(moto.__version__ != '${MOTO_VERSION}')"; then
  echo "moto ${MOTO_VERSION}: cached in $MOTO_VENV"
else
  rm -rf "$MOTO_VENV"
  python3 -m venv "$MOTO_VENV"
  "$MOTO_VENV/bin/python" -m pip install --quiet --disable-pip-version-check "moto[server]==${MOTO_VERSION}"
  echo "moto ${MOTO_VERSION} installed in $MOTO_VENV"
fi
# KServe's InferenceService CRD from its Go module (contract tier: test/contract/kserve.test.ts), cached
# outside the repo by the version in tools/kserve/version. Needs Go (CI has it for the real control
# planes); without it the test says TIER SKIPPED, which GANTRY_REQUIRE_ALL_TIERS=1 turns into a failure.
if command -v go >/dev/null; then
  bash scripts/kserve-crds.sh >/dev/null
else
  echo "go not found: KServe's CRD not fetched (test/contract/kserve.test.ts will skip)" >&2
fi
# Chromium from Debian's packages (e2e tier: the dashboard's browser test drives it with playwright-core).
if [ -x /usr/bin/chromium ]; then
  echo "chromium: $(/usr/bin/chromium --version 2>/dev/null || echo installed)"
elif command -v apt-get >/dev/null; then
  SUDO=""; [ "$(id -u)" = 0 ] || SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq chromium >/dev/null
  echo "chromium installed: $(/usr/bin/chromium --version)"
else
  echo "chromium is required for the dashboard's browser test (Debian package 'chromium')" >&2; exit 1
fi
if [ "$WHAT" = all ]; then install_go all; fi
