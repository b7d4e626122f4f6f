#!/usr/bin/env bash
# Builds the test OCI registry (main.go: distribution's registry, filesystem storage only) from the
# Go modules pinned in go.mod, once, into a cache directory keyed by everything that affects the
# result, and prints that bin directory on stdout.
#
#   ${XDG_CACHE_HOME:-$HOME/.cache}/olm-rs/registry/<key>/bin
#   key = sha256 of go version, go.mod, go.sum, this script and main.go
#
# Cold, it takes about a minute of CPU (a fraction of the control plane's build); a hit costs nothing.
# Environment: GO (go binary; default: `go` on PATH, else /usr/local/go/bin/go).
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
cd "$here"

go=${GO:-$(command -v go || echo /usr/local/go/bin/go)}
[ -x "$go" ] || { echo "build.sh: Go not found (set GO=/path/to/go; Go >= 1.26 is needed)" >&2; exit 1; }
export GOTOOLCHAIN=local CGO_ENABLED=0
export GOFLAGS="${GOFLAGS:+$GOFLAGS }-mod=readonly"

key=$(
	{
		"$go" version
		sha256sum go.mod go.sum build.sh main.go
	} | sha256sum | cut -c1-16
)
root=${XDG_CACHE_HOME:-$HOME/.cache}/olm-rs/registry
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

echo "build.sh: building the test registry into $cache/bin..." >&2
start=$(date +%s)
rm -rf "$cache"
mkdir -p "$cache/tmp"
"$go" build -trimpath -ldflags "-s -w" -o "$cache/tmp/registry" .
mv "$cache/tmp" "$cache/bin"
touch "$cache/complete"
echo "build.sh: built in $(($(date +%s) - start))s" >&2
echo "$cache/bin"
