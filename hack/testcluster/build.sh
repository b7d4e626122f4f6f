#!/usr/bin/env bash
# Builds the test control plane (kube-apiserver, kube-controller-manager, kube-scheduler, etcd, kwok
# and the `testcluster` supervisor) from the Go modules pinned in go.mod, once, into a cache directory
# keyed by everything that affects the result, and prints that bin directory on stdout.
#
#   ${XDG_CACHE_HOME:-$HOME/.cache}/olm-rs/testcluster/<key>/bin
#   key = sha256 of go version, go.mod, go.sum, this script and the supervisor's Go sources
#
# A cache hit costs nothing; a miss on a machine with a warm Go build cache only relinks.
# Environment: GO (go binary; default: `go` on PATH, else /usr/local/go/bin/go).
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
cd "$here"

go=${GO:-$(command -v go || echo /usr/local/go/bin/go)}
[ -x "$go" ] || { echo "build.sh: Go not found (set GO=/path/to/go; Go >= 1.26 is needed)" >&2; exit 1; }
# Use exactly this toolchain (never download another), no cgo, and go.mod as committed.
export GOTOOLCHAIN=local CGO_ENABLED=0
export GOFLAGS="${GOFLAGS:+$GOFLAGS }-mod=readonly"

key=$(
	{
		"$go" version
		find . -name '*.go' -not -path './testdata/*' | LC_ALL=C sort | xargs sha256sum
		sha256sum go.mod go.sum build.sh
	} | sha256sum | cut -c1-16
)
root=${XDG_CACHE_HOME:-$HOME/.cache}/olm-rs/testcluster
cache=$root/$key
if [ -f "$cache/complete" ]; then
	echo "$cache/bin"
	exit 0
fi

# One build at a time: a second caller waits, then finds the result.
mkdir -p "$root"
exec 9>"$root/build.lock"
flock 9
if [ -f "$cache/complete" ]; then
	echo "$cache/bin"
	exit 0
fi

k8s_version=$("$go" list -m -f '{{.Version}}' k8s.io/kubernetes)
minor=${k8s_version#v1.}
minor=${minor%%.*}
ldflags="-s -w"
for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
	ldflags+=" -X $pkg.gitVersion=$k8s_version -X $pkg.gitMajor=1 -X $pkg.gitMinor=$minor -X $pkg.gitTreeState=clean"
done

echo "build.sh: building the control plane ($k8s_version) into $cache/bin; the first build takes a while..." >&2
start=$(date +%s)
rm -rf "$cache"
mkdir -p "$cache/tmp"
"$go" build -trimpath -ldflags "$ldflags" -o "$cache/tmp/" \
	k8s.io/kubernetes/cmd/kube-apiserver \
	k8s.io/kubernetes/cmd/kube-controller-manager \
	k8s.io/kubernetes/cmd/kube-scheduler \
	sigs.k8s.io/kwok/cmd/kwok \
	.
"$go" build -trimpath -ldflags "-s -w" -o "$cache/tmp/etcd" go.etcd.io/etcd/server/v3
mv "$cache/tmp" "$cache/bin"
touch "$cache/complete"
echo "build.sh: built in $(($(date +%s) - start))s" >&2
echo "$cache/bin"
