#!/usr/bin/env bash
# Regenerates go.mod/go.sum of the test control plane for one Kubernetes release.
#
# k8s.io/kubernetes requires each of its staging modules (k8s.io/api, k8s.io/apiserver, ...) at
# v0.0.0 and maps them to ./staging/src/... with replace directives. Replaces of a dependency are
# ignored by Go, so a module that imports k8s.io/kubernetes must replace every staging module with
# its published tag (v0.<minor>.<patch> for v1.<minor>.<patch>) itself. The staging list changes
# between minor releases, so it is read here from the go.mod of the exact release, never copied.
#
# Usage: hack/testcluster/update-deps.sh [KUBERNETES_VERSION]   (default: the pinned one below)
# Needs only Go and the module proxy; commit go.mod and go.sum afterwards.
set -euo pipefail

# Pinned release. v1.36.x: its go.mod declares `go 1.26.0`, so it builds with the Go 1.26 toolchain
# under GOTOOLCHAIN=local; it is the newest release on the module proxy. Bump deliberately and check
# the new release's `go` line first (a newer Go requirement means a toolchain upgrade).
K8S_VERSION=${1:-v1.36.3}
# The KWOK release whose node/pod stages simulate kubelets (sigs.k8s.io/kwok, built into `kwok`).
KWOK_VERSION=v0.8.0

cd "$(dirname "$0")"
export GOTOOLCHAIN=local GOFLAGS=-mod=mod

staging_version="v0.${K8S_VERSION#v1.}"
kmod=$(go mod download -json "k8s.io/kubernetes@${K8S_VERSION}" | sed -n 's/^[[:space:]]*"GoMod": "\(.*\)",$/\1/p')
[ -n "$kmod" ] || { echo "cannot find go.mod of k8s.io/kubernetes@${K8S_VERSION}" >&2; exit 1; }

# Every `k8s.io/<name> => ./staging/src/k8s.io/<name>` line of the release's own replace block.
mapfile -t staging < <(awk '$2 == "=>" && $3 ~ /^\.\/staging\// {print $1}' "$kmod" | sort -u)
[ "${#staging[@]}" -gt 10 ] || { echo "found only ${#staging[@]} staging modules in $kmod" >&2; exit 1; }

# Start from a clean slate, so that nothing from an earlier release (a staging module that no longer
# exists, an old tool) survives; `go mod tidy` below adds back what the Go sources import.
module=$(go mod edit -json | sed -n 's/^[[:space:]]*"Path": "\(.*\)"$/\1/p' | head -1)
printf 'module %s\n\ngo %s\n' "$module" "$(awk '$1 == "go" {print $2; exit}' "$kmod")" > go.mod
rm -f go.sum
for m in "${staging[@]}"; do
	go mod edit -replace="${m}=${m}@${staging_version}"
done
# Keep Kubernetes' own GODEBUG defaults (its go.mod has `godebug default=go1.26`).
godebug=$(awk '$1 == "godebug" {print $2}' "$kmod" | head -1)
[ -z "$godebug" ] || go mod edit -godebug="$godebug"

# etcd is built at the version this Kubernetes release is tested with (its go.mod requires it).
etcd_version=$(awk '$1 == "go.etcd.io/etcd/server/v3" {print $2; exit}' "$kmod")
[ -n "$etcd_version" ] || { echo "k8s.io/kubernetes@${K8S_VERSION} does not require etcd/server/v3" >&2; exit 1; }

# The binaries the control plane is built from, each at an explicit version: a bare `go get -tool`
# would upgrade to the newest release and drag its dependencies along.
go get -tool \
	"k8s.io/kubernetes/cmd/kube-apiserver@${K8S_VERSION}" \
	"k8s.io/kubernetes/cmd/kube-controller-manager@${K8S_VERSION}" \
	"k8s.io/kubernetes/cmd/kube-scheduler@${K8S_VERSION}" \
	"go.etcd.io/etcd/server/v3@${etcd_version}" \
	"sigs.k8s.io/kwok/cmd/kwok@${KWOK_VERSION}"
go mod tidy
echo "go.mod pinned: k8s.io/kubernetes ${K8S_VERSION} (${#staging[@]} staging modules at ${staging_version}), etcd ${etcd_version}, kwok ${KWOK_VERSION}"
