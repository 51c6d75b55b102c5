#!/usr/bin/env bash
# Build the "light tier" real control plane (etcd + kube-apiserver) from the Go module proxy,
# using the wrapper modules in tools/realcp/{kube,etcd} (see scripts/realcp-gomod.sh).
#
# Binaries go to ${GANTRY_CACHE:-$HOME/.cache/gantry}/realcp/k8s-<ver>-etcd-<ver>/bin/, outside the
# repo and keyed by the versions pinned in the wrapper go.mod files. If both binaries are already
# there, nothing is built. GOMODCACHE and GOCACHE keep their defaults (outside the repo).
#
# Usage:
#   scripts/realcp-build.sh                  build if needed, print the bin dir (last line)
#   scripts/realcp-build.sh --print-bin-dir  only print the bin dir (no build, no go command)
#   scripts/realcp-build.sh --force          rebuild even if the binaries exist
# Environment: GANTRY_CACHE (cache root), REALCP_BUILD_P (parallel packages, default 2).
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
KUBE_DIR="$ROOT/tools/realcp/kube"
ETCD_DIR="$ROOT/tools/realcp/etcd"

pinned() { # pinned <go.mod> <module>: the required version of <module>
  awk -v m="$2" '($1 == m || ($1 == "require" && $2 == m)) { v = ($1 == "require") ? $3 : $2; print v; exit }' "$1"
}

K8S_VERSION="$(pinned "$KUBE_DIR/go.mod" k8s.io/kubernetes)"
ETCD_VERSION="$(pinned "$ETCD_DIR/go.mod" go.etcd.io/etcd/server/v3)"
if [[ -z "$K8S_VERSION" || -z "$ETCD_VERSION" ]]; then
  echo "realcp-build: cannot read pinned versions from $KUBE_DIR/go.mod / $ETCD_DIR/go.mod" >&2
  exit 1
fi
CACHE_ROOT="${GANTRY_CACHE:-$HOME/.cache/gantry}"
KEY_DIR="$CACHE_ROOT/realcp/k8s-$K8S_VERSION-etcd-$ETCD_VERSION"
BIN_DIR="$KEY_DIR/bin"

FORCE=0
case "${1:-}" in
  --print-bin-dir) echo "$BIN_DIR"; exit 0 ;;
  --force) FORCE=1 ;;
  "") ;;
  *) echo "usage: $0 [--print-bin-dir|--force]" >&2; exit 2 ;;
esac

have_bins() { [[ -x "$BIN_DIR/etcd" && -x "$BIN_DIR/kube-apiserver" ]]; }

if ((FORCE == 0)) && have_bins; then
  echo "$BIN_DIR"
  exit 0
fi

mkdir -p "$KEY_DIR"
# One build per version key at a time (CI and a developer shell may race).
exec 9>"$KEY_DIR/.build.lock"
flock 9
if ((FORCE == 0)) && have_bins; then
  echo "$BIN_DIR"
  exit 0
fi

if [[ ! "$K8S_VERSION" =~ ^v1\.([0-9]+)\.([0-9]+)$ ]]; then
  echo "realcp-build: unexpected k8s version '$K8S_VERSION'" >&2
  exit 1
fi
K8S_MINOR="${BASH_REMATCH[1]}"

export GOTOOLCHAIN="${GOTOOLCHAIN:-local}"
export CGO_ENABLED=0
# 2 cores: compile at most REALCP_BUILD_P packages at once (keeps peak RAM and load sane).
P="${REALCP_BUILD_P:-2}"
GOFLAGS="${GOFLAGS:-}"
[[ " $GOFLAGS " == *" -p="* ]] || GOFLAGS="$GOFLAGS -p=$P"
[[ " $GOFLAGS " == *"-buildvcs="* ]] || GOFLAGS="$GOFLAGS -buildvcs=false"
export GOFLAGS="${GOFLAGS# }"

go_info_time() { # commit time of a module version, from the module proxy's .info file
  local info
  info="$(go mod download -json "$1" | sed -n 's/^[[:space:]]*"Info":[[:space:]]*"\(.*\)",\{0,1\}$/\1/p' | head -n1)"
  [[ -n "$info" && -f "$info" ]] || return 0
  sed -n 's/.*"Time":[[:space:]]*"\([^"]*\)".*/\1/p' "$info" | head -n1
}

START=$(date +%s)
echo "realcp-build: building kube-apiserver $K8S_VERSION and etcd $ETCD_VERSION into $BIN_DIR" >&2
echo "realcp-build: go $(go env GOVERSION), GOFLAGS='$GOFLAGS', GOMODCACHE=$(go env GOMODCACHE), GOCACHE=$(go env GOCACHE)" >&2

STAGE="$(mktemp -d "$KEY_DIR/.stage.XXXXXX")"
trap 'rm -rf "$STAGE"' EXIT

# Version ldflags, as kubernetes hack/lib/version.sh sets them, so /version reports the real version
# (Kueue parses it with ParseSemantic). buildDate = the tag's commit time (reproducible).
BUILD_DATE="$(cd "$KUBE_DIR" && go_info_time "k8s.io/kubernetes@$K8S_VERSION")"
BUILD_DATE="${BUILD_DATE:-1970-01-01T00:00:00Z}"
LDF="-s -w"
for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
  LDF+=" -X $pkg.gitVersion=$K8S_VERSION -X $pkg.gitMajor=1 -X $pkg.gitMinor=$K8S_MINOR"
  LDF+=" -X $pkg.gitTreeState=clean -X $pkg.buildDate=$BUILD_DATE -X $pkg.gitCommit="
done

T0=$(date +%s)
(cd "$ETCD_DIR" && go build -trimpath \
  -ldflags "-s -w -X go.etcd.io/etcd/api/v3/version.GitSHA=go-module-proxy" \
  -o "$STAGE/etcd" go.etcd.io/etcd/server/v3)
T1=$(date +%s)
echo "realcp-build: etcd built in $((T1 - T0)) s" >&2

(cd "$KUBE_DIR" && go build -trimpath -ldflags "$LDF" \
  -o "$STAGE/kube-apiserver" k8s.io/kubernetes/cmd/kube-apiserver)
T2=$(date +%s)
echo "realcp-build: kube-apiserver built in $((T2 - T1)) s" >&2

"$STAGE/etcd" --version >&2
"$STAGE/kube-apiserver" --version >&2

mkdir -p "$BIN_DIR"
mv -f "$STAGE/etcd" "$BIN_DIR/etcd"
mv -f "$STAGE/kube-apiserver" "$BIN_DIR/kube-apiserver"

END=$(date +%s)
echo "realcp-build: build time $((END - START)) s (etcd $((T1 - T0)) s, kube-apiserver $((T2 - T1)) s)" >&2
echo "$BIN_DIR"
