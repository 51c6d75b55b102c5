#!/usr/bin/env bash
# Installs what the tiers beyond unit tests need, caching slow builds outside the repo.
set -euo pipefail
cd "$(dirname "$0")/.."
if [ -f scripts/realcp-build.sh ]; then
  bash scripts/realcp-build.sh
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
bash scripts/realcp-heavy-build.sh  # heavy tier (KCM, scheduler, kwok, JobSet, Trainer, Kueue) from the Go module proxy, cached outside the repo
