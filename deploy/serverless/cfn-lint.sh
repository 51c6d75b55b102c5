#!/usr/bin/env bash
# `npm run cfn-lint`: cfn-lint on the template `npm run package` wrote. Fails on errors and on
# warnings: the template is fixed rather than a warning tolerated. No rule is ignored; one may be
# only in a .cfnlintrc at the repository root, with the reason for that rule written next to it. cfn-lint comes from $CFN_LINT, else the pinned venv that
# scripts/ci-install.sh caches, else whatever `cfn-lint` is on PATH (with a note if it differs).
set -euo pipefail
cd "$(dirname "$0")/../.."
CFN_LINT_VERSION="${CFN_LINT_VERSION:-1.58.0}"
TEMPLATE="${1:-.serverless/cloudformation-template-update-stack.json}"
VENV_BIN="${GANTRY_CACHE:-$HOME/.cache/gantry}/venv-cfn-lint-${CFN_LINT_VERSION}/bin/cfn-lint"

if [ -n "${CFN_LINT:-}" ]; then
  bin="$CFN_LINT"
elif [ -x "$VENV_BIN" ]; then
  bin="$VENV_BIN"
elif command -v cfn-lint >/dev/null 2>&1; then
  bin="$(command -v cfn-lint)"
  echo "note: using $("$bin" --version) from PATH; the pinned one is ${CFN_LINT_VERSION} (bash scripts/ci-install.sh)" >&2
else
  echo "cfn-lint is not installed: run bash scripts/ci-install.sh (cfn-lint ${CFN_LINT_VERSION} from PyPI)" >&2
  exit 127
fi
if [ ! -f "$TEMPLATE" ]; then
  echo "$TEMPLATE does not exist: run npm run package first" >&2
  exit 1
fi
echo "$("$bin" --version) on $TEMPLATE"
exec "$bin" --non-zero-exit-code warning -- "$TEMPLATE"
