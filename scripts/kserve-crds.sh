#!/usr/bin/env bash
# KServe's InferenceService CRD (serving.kserve.io/v1beta1, config/crd/full/) from KServe's Go module
# through the Go module proxy, cached outside the repo and keyed by the version pinned in
# tools/kserve/version:
#   ${GANTRY_CACHE:-$HOME/.cache/gantry}/kserve/<version>/serving.kserve.io_inferenceservices.yaml
# test/contract/kserve.test.ts installs it on a real kube-apiserver (test/helpers/kserve.ts finds it).
#
# Usage:
#   scripts/kserve-crds.sh               fetch if needed, print the folder (last line)
#   scripts/kserve-crds.sh --print-dir   only print the folder
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
VERSION="$(tr -d '[:space:]' <"$ROOT/tools/kserve/version")"
DIR="${GANTRY_CACHE:-$HOME/.cache/gantry}/kserve/$VERSION"
FILE=serving.kserve.io_inferenceservices.yaml

if [ "${1:-}" = --print-dir ]; then echo "$DIR"; exit 0; fi
if [ -s "$DIR/$FILE" ]; then echo "$DIR"; exit 0; fi
command -v go >/dev/null || { echo "kserve-crds: go is required (the Go module proxy serves KServe's module)" >&2; exit 1; }

# Outside any module: `go mod download module@version` fetches (and verifies against the checksum
# database) the module zip into GOMODCACHE and prints where it is unpacked.
MOD_DIR="$(cd "$(mktemp -d)" && GOFLAGS=-mod=mod go mod download -json "github.com/kserve/kserve@$VERSION" |
  sed -n 's/^[[:space:]]*"Dir":[[:space:]]*"\(.*\)",\{0,1\}$/\1/p' | head -n1)"
SRC="$MOD_DIR/config/crd/full/$FILE"
[ -s "$SRC" ] || { echo "kserve-crds: $SRC not found in github.com/kserve/kserve@$VERSION" >&2; exit 1; }
mkdir -p "${DIR%/*}"
TMP="$(mktemp -d "${DIR%/*}/.tmp.XXXXXX")"
cp "$SRC" "$TMP/$FILE"
chmod 755 "$TMP"
chmod 644 "$TMP/$FILE"
rm -rf "$DIR"
mv "$TMP" "$DIR"
echo "kserve $VERSION CRD from the Go module proxy: $DIR" >&2
echo "$DIR"
