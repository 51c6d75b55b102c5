#!/usr/bin/env bash
# Build the "heavy tier" real control plane components from the Go module proxy, using the wrapper
# modules in tools/realcp-heavy/* (each a go.mod + go.sum with `tool` directives; no code of ours):
#
#   kube              kube-controller-manager, kube-scheduler   (k8s.io/kubernetes, same replaces as the light tier)
#   kwok              kwok                                      (sigs.k8s.io/kwok)
#   training-operator training-operator                         (Kubeflow Training Operator v1, PyTorchJob)
#   jobset-v0.10.1, jobset-v0.11.1, jobset-v0.12.0              jobset
#   trainer-v2.1.0, trainer-v2.2.0, trainer-v2.3.0              trainer-controller-manager
#   kueue-v0.16.6, kueue-v0.17.1, kueue-v0.19.2                 kueue
#   scheduler-plugins scheduler, controller                     (scheduler-plugins v0.35.4-devel: Coscheduling + PodGroup controller)
# (the binaries of each are the `tool` directives of its go.mod). Each controller of a version set is
# built on the module graph of its own project's go.mod (one wrapper per controller: the wrapper
# requires only that module, so MVS selects exactly its go.mod's versions), as its release image is;
# test/e2e-real/version-sets.test.ts checks it.
#
# Each component builds into its own cache dir outside the repo, keyed by the pinned versions and a
# hash of the wrapper's go.sum:
#   ${GANTRY_CACHE:-$HOME/.cache/gantry}/realcp-heavy/<component>-<versions>-<sum>/bin/
# A component whose binaries are all there is skipped. A component that fails to build is reported
# with the exact module@version that failed (and written to <dir>/FAILED, which the TS harness reads
# to skip loudly); the other components still build. Binaries are never written inside the repo.
#
# Which components make each version set is tools/realcp-heavy/version-sets.tsv.
#
# Usage:
#   scripts/realcp-heavy-build.sh [component...]   build (default: all), print "<component>\t<bin dir>" lines
#   scripts/realcp-heavy-build.sh --sets v2.3,v2.1  build what those version sets need (and the "always" line)
#   scripts/realcp-heavy-build.sh --print-bin-dirs  only print "<component>\t<bin dir>" lines (no build)
#   scripts/realcp-heavy-build.sh --force [component...]
# Environment: GANTRY_CACHE, REALCP_BUILD_P (parallel packages, default 2),
#   REALCP_HEAVY_STRICT=1 (exit non-zero when any component failed; default: exit 0 and let the
#   tests' tierAvailable() fail loudly under GANTRY_REQUIRE_ALL_TIERS=1).
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
TOOLS="$ROOT/tools/realcp-heavy"
CACHE_ROOT="${GANTRY_CACHE:-$HOME/.cache/gantry}/realcp-heavy"
ALL=(kube kwok kueue-v0.17.1 training-operator
     jobset-v0.10.1 jobset-v0.11.1 jobset-v0.12.0
     trainer-v2.1.0 trainer-v2.2.0 trainer-v2.3.0
     kueue-v0.16.6 kueue-v0.19.2 scheduler-plugins)

# components_for_sets <v2.3,v2.1|all>: the "always" components, then each named set's (version-sets.tsv)
components_for_sets() {
  awk -F'\t' -v want=",$1," '
    /^#/ || NF == 0 { next }
    $1 == "always" { n = split($2, a, " "); for (i = 1; i <= n; i++) if (!seen[a[i]]++) print a[i]; next }
    want == ",all," || index(want, "," $1 ",") { for (i = 2; i <= 4; i++) if (!seen[$i]++) print $i }
  ' "$TOOLS/version-sets.tsv"
}

pinned() { # pinned <go.mod> <module>
  awk -v m="$2" '($1 == m || ($1 == "require" && $2 == m)) { v = ($1 == "require") ? $3 : $2; print v; exit }' "$1"
}

# The binaries of a component are its wrapper's `tool` directives: binary name = the package's last
# path element without a ".v1"-style suffix (sigs.k8s.io/kueue/cmd/kueue -> kueue, sigs.k8s.io/jobset ->
# jobset, .../cmd/training-operator.v1 -> training-operator).
tools_of() { # tools_of <go.mod>: one tool package per line
  awk '/^tool[[:space:]]*\(/ { blk = 1; next } blk && /^\)/ { blk = 0; next } blk && NF { print $1; next }
       /^tool[[:space:]]+[^(]/ { print $2 }' "$1"
}
pkgs() { # pkgs <component>: "binary=package ..."
  local gm="$TOOLS/$1/go.mod" t name out=""
  [[ -f "$gm" ]] || return 1
  for t in $(tools_of "$gm"); do
    name="${t##*/}"; name="${name%.v[0-9]*}"
    out+="$name=$t "
  done
  [[ -n "$out" ]] || return 1
  echo "${out% }"
}
key_modules() { # the modules (required in go.mod) that provide the tool packages
  local gm="$TOOLS/$1/go.mod" t m best
  for t in $(tools_of "$gm"); do
    best=""
    for m in $(awk '$1 == "require" && $2 != "(" { print $2 } /^require[[:space:]]*\(/ { r = 1; next } r && /^\)/ { r = 0 } r && NF { print $1 }' "$gm"); do
      if [[ "$t" == "$m" || "$t" == "$m/"* ]] && ((${#m} > ${#best})); then best="$m"; fi
    done
    [[ -n "$best" ]] && echo "$best"
  done | awk '!seen[$0]++' | tr '\n' ' '
}
short() { case "$1" in github.com/kubeflow/trainer/v2) echo trainer ;; github.com/kubeflow/training-operator) echo tfo ;; k8s.io/kubernetes) echo k8s ;; *) echo "${1##*/}" ;; esac; }

key_dir() { # key_dir <component>
  local c="$1" dir="$TOOLS/$1" key="$1" m v sum
  [[ -f "$dir/go.mod" ]] || return 1
  for m in $(key_modules "$c"); do
    v="$(pinned "$dir/go.mod" "$m")"
    key+="-$(short "$m")-${v:-none}"
  done
  sum="$(cat "$dir/go.mod" "$dir/go.sum" 2>/dev/null | sha256sum | cut -c1-8)"
  echo "$CACHE_ROOT/$key-$sum"
}

have_bins() { # have_bins <component> <bin dir>
  local p
  for p in $(pkgs "$1"); do [[ -x "$2/${p%%=*}" ]] || return 1; done
}

print_dirs() {
  local c
  for c in "${ALL[@]}"; do
    [[ -f "$TOOLS/$c/go.mod" ]] || continue
    printf '%s\t%s\n' "$c" "$(key_dir "$c")/bin"
  done
}

FORCE=0
COMPONENTS=()
while (($#)); do
  case "$1" in
    --print-bin-dirs) print_dirs; exit 0 ;;
    --force) FORCE=1 ;;
    --sets) shift; mapfile -t -O "${#COMPONENTS[@]}" COMPONENTS < <(components_for_sets "${1:?--sets needs a list}") ;;
    -*) echo "usage: $0 [--print-bin-dirs|--force] [--sets v2.3,v2.1] [component...]" >&2; exit 2 ;;
    *) COMPONENTS+=("$1") ;;
  esac
  shift
done
((${#COMPONENTS[@]})) || COMPONENTS=("${ALL[@]}")

export GOTOOLCHAIN="${GOTOOLCHAIN:-local}"
export CGO_ENABLED=0
P="${REALCP_BUILD_P:-2}"
GOFLAGS="${GOFLAGS:-}"
[[ " $GOFLAGS " == *" -p="* ]] || GOFLAGS="$GOFLAGS -p=$P"
[[ " $GOFLAGS " == *"-buildvcs="* ]] || GOFLAGS="$GOFLAGS -buildvcs=false"
export GOFLAGS="${GOFLAGS# }"

# Version ldflags for k8s binaries (as kubernetes hack/lib/version.sh sets them).
k8s_ldflags() {
  local v="$1" minor ldf="-s -w" pkg
  [[ "$v" =~ ^v1\.([0-9]+)\. ]] && minor="${BASH_REMATCH[1]}"
  for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
    ldf+=" -X $pkg.gitVersion=$v -X $pkg.gitMajor=1 -X $pkg.gitMinor=$minor -X $pkg.gitTreeState=clean"
    ldf+=" -X $pkg.buildDate=1970-01-01T00:00:00Z -X $pkg.gitCommit="
  done
  echo "$ldf"
}

# Name the module@version that owns a failing package, from go's error output.
culprit() { # culprit <component dir> <log>
  local dir="$1" log="$2" path m best=""
  # 1. a module the proxy did not serve
  m="$(grep -oE '[a-zA-Z0-9._/-]+@v[0-9][^:[:space:]]*: (reading|verifying|invalid version|unknown revision)[^\n]*' "$log" | head -n1)"
  if [[ -n "$m" ]]; then echo "$m"; return; fi
  # 2. a compile error in a file of some module in GOMODCACHE
  path="$(grep -oE '[^[:space:]]+@v[^/[:space:]]+/[^:[:space:]]+\.go' "$log" | head -n1)"
  if [[ -n "$path" ]]; then
    m="${path%%/*.go}"; m="$(echo "$path" | sed -E 's#^(.*@v[^/]+)/.*#\1#')"
    echo "$m"; return
  fi
  # 3. a package path: map to its module with go list
  path="$(grep -oE '^# [^[:space:]]+' "$log" | head -n1 | cut -c3-)"
  if [[ -n "$path" ]]; then
    best="$(cd "$dir" && go list -f '{{with .Module}}{{.Path}}@{{.Version}}{{end}}' "$path" 2>/dev/null || true)"
    [[ -n "$best" ]] && { echo "$best"; return; }
  fi
  echo "unknown (see $log)"
}

FAILED_ANY=0
TOTAL_START=$(date +%s)
for c in "${COMPONENTS[@]}"; do
  dir="$TOOLS/$c"
  if [[ ! -f "$dir/go.mod" ]] || ! pkgs "$c" >/dev/null; then
    echo "realcp-heavy-build: unknown component '$c' (no $dir/go.mod)" >&2
    FAILED_ANY=1
    continue
  fi
  kd="$(key_dir "$c")"
  bin="$kd/bin"
  if ((FORCE == 0)) && have_bins "$c" "$bin"; then
    echo "realcp-heavy-build: $c: cached in $bin" >&2
    printf '%s\t%s\n' "$c" "$bin"
    continue
  fi
  mkdir -p "$kd"
  (
    exec 9>"$kd/.build.lock"
    flock 9
    if ((FORCE == 0)) && have_bins "$c" "$bin"; then exit 0; fi
    rm -f "$kd/FAILED"
    stage="$(mktemp -d "$kd/.stage.XXXXXX")"
    trap 'rm -rf "$stage"' EXIT
    log="$kd/build.log"
    : >"$log"
    versions=""
    for m in $(key_modules "$c"); do versions+=" $m@$(pinned "$dir/go.mod" "$m")"; done
    echo "realcp-heavy-build: $c:$versions -> $bin (go $(go env GOVERSION), GOFLAGS='$GOFLAGS')" >&2
    ldf="-s -w"
    if [[ "$c" == kube ]]; then ldf="$(k8s_ldflags "$(pinned "$dir/go.mod" k8s.io/kubernetes)")"; fi
    t0=$(date +%s)
    # Download first so a module the proxy lacks is named as such.
    if ! (cd "$dir" && go mod download 2>>"$log" >/dev/null && go list -deps $(for p in $(pkgs "$c"); do echo "${p#*=}"; done) >/dev/null 2>>"$log"); then
      who="$(culprit "$dir" "$log")"
      echo "realcp-heavy-build: $c: FAILED resolving modules: $who (log: $log)" >&2
      echo "resolve: $who" >"$kd/FAILED"
      exit 1
    fi
    for p in $(pkgs "$c"); do
      name="${p%%=*}" pkg="${p#*=}"
      t=$(date +%s)
      if ! (cd "$dir" && go build -trimpath -ldflags "$ldf" -o "$stage/$name" "$pkg" >>"$log" 2>&1); then
        who="$(culprit "$dir" "$log")"
        echo "realcp-heavy-build: $c: FAILED building $name ($pkg): $who" >&2
        tail -n 15 "$log" | sed 's/^/    /' >&2
        echo "build $name ($pkg): $who" >"$kd/FAILED"
        exit 1
      fi
      echo "realcp-heavy-build: $c: $name built in $(($(date +%s) - t)) s" >&2
    done
    mkdir -p "$bin"
    for p in $(pkgs "$c"); do mv -f "$stage/${p%%=*}" "$bin/"; done
    echo "realcp-heavy-build: $c: done in $(($(date +%s) - t0)) s" >&2
  ) || { FAILED_ANY=1; continue; }
  printf '%s\t%s\n' "$c" "$bin"
done
echo "realcp-heavy-build: total $(($(date +%s) - TOTAL_START)) s" >&2
if ((FAILED_ANY)) && [[ "${REALCP_HEAVY_STRICT:-0}" == 1 ]]; then exit 1; fi
exit 0
