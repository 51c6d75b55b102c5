#!/usr/bin/env bash
# `npm run package [-- --stage prod]`: `serverless package` (osls) offline → .serverless/
# (CloudFormation template + one zip per function). Packaging calls no AWS API; the SDK still
# wants credentials to exist, so placeholders are set here when none are configured.
set -euo pipefail
cd "$(dirname "$0")/.."
if [ -z "${AWS_ACCESS_KEY_ID:-}" ] && [ -z "${AWS_PROFILE:-}" ]; then
  export AWS_ACCESS_KEY_ID=AKIAGANTRYPACKAGEONLY
  export AWS_SECRET_ACCESS_KEY=offline-packaging-uses-no-aws-api
fi
export AWS_REGION="${AWS_REGION:-us-east-1}"
export SLS_TELEMETRY_DISABLED=1
# serverless-esbuild (1.57.2, the newest) stages each function's zip in a folder under the OS temp
# dir and never removes it: its release is a non-recursive remove of a full folder, whose ENOTEMPTY
# it swallows (floydspace/serverless-esbuild#589). That is one folder per function per package,
# 38 at a time here. Packaging gets a temp dir of its own, removed when it ends.
tmp="$(mktemp -d "${TMPDIR:-/tmp}/gantry-package.XXXXXX")"
trap 'rm -rf "$tmp"' EXIT
# npm puts node_modules/.bin first on PATH: `serverless` is osls, `node` is the project's Node 24.
TMPDIR="$tmp" serverless package "$@"
