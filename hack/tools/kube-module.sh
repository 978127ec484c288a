# kube-module.sh: sourced by build-kube-testbin.sh and build-kube-node.sh, which build binaries of
# k8s.io/kubernetes from the Go module proxy. Needs KUBE_VERSION (v1.X.Y) set.

# have_version BINARY SUBSTRING: the binary exists and its version output contains SUBSTRING
# (no `| grep -q`: with pipefail an early grep exit SIGPIPEs the writer).
have_version() {
  local out
  [ -x "$1" ] || return 1
  out=$("$1" --version 2>/dev/null || "$1" version --client 2>/dev/null || true)
  [[ $out == *"$2"* ]]
}

# kube_module DIR NAME CMD...: a throwaway module example.invalid/NAME in DIR that requires
# k8s.io/kubernetes KUBE_VERSION and imports cmd/CMD for each CMD, tidied. k8s.io/kubernetes
# requires its staging modules at v0.0.0 and maps them to ./staging, which the module zip
# lacks: each is pinned to the published v0.X.Y instead.
kube_module() {
  local dir=$1 name=$2 gomod c
  shift 2
  mkdir -p "$dir"
  gomod=$(cd "$dir" && go mod download -json "k8s.io/kubernetes@$KUBE_VERSION" | sed -n 's/.*"GoMod": "\(.*\)".*/\1/p')
  {
    printf 'module example.invalid/%s\n\ngo 1.26.0\n\nrequire k8s.io/kubernetes %s\n\nreplace (\n' "$name" "$KUBE_VERSION"
    awk '/^require[ (]/,/^\)/' "$gomod" | awk -v v="v0.${KUBE_VERSION#v1.}" '$2=="v0.0.0"{print "\t"$1" => "$1" "v}'
    printf ')\n'
  } > "$dir/go.mod"
  {
    printf '//go:build tools\n\npackage tools\n\nimport (\n'
    for c in "$@"; do printf '\t_ "k8s.io/kubernetes/cmd/%s"\n' "$c"; done
    printf ')\n'
  } > "$dir/tools.go"
  (cd "$dir" && go mod tidy)
}

# kube_ldflags: the -ldflags of a build that reports KUBE_VERSION as its version.
kube_ldflags() {
  local v=${KUBE_VERSION#v} pkg=k8s.io/component-base/version
  printf '%s' "-s -w -X $pkg.gitVersion=$KUBE_VERSION -X $pkg.gitMajor=${v%%.*} -X $pkg.gitMinor=$(echo "$v" | cut -d. -f2) -X $pkg.gitTreeState=clean -X k8s.io/client-go/pkg/version.gitVersion=$KUBE_VERSION"
}
