#!/usr/bin/env bash
# Installs what the tiers beyond unit tests need, caching slow builds outside the repo.
set -euo pipefail
cd "$(dirname "$0")/.."
if [ -f scripts/realcp-build.sh ]; then
  bash scripts/realcp-build.sh
fi
