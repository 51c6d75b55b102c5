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
# npm puts node_modules/.bin first on PATH: `serverless` is osls, `node` is the project's Node 24.
exec serverless package "$@"
