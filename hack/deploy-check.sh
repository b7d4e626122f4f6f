#!/usr/bin/env bash
# The README's deploy commands, run exactly as written on a fresh control plane
# (`make deploy-check`; CI runs it): a control plane of its own with no olm-rs
# object in it, the commands between the README's `deploy:begin` and
# `deploy:end` markers run one by one from the repository root, each of which
# must exit 0 the first time; then every object of `manifests/` must exist.
#
# With KUBECONFIG set it uses that cluster instead, which must hold no olm-rs
# CRD yet (a fresh kind cluster, for example).
set -euo pipefail
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$repo"
say() { echo "deploy-check: $*" >&2; }

commands=$(awk '/<!-- deploy:begin -->/ {on = 1; next} /<!-- deploy:end -->/ {on = 0} on && !/^```/' README.md)
if [ -z "$commands" ]; then
	say "README.md has no commands between <!-- deploy:begin --> and <!-- deploy:end -->"
	exit 1
fi

cluster_dir=
cleanup() {
	local status=$?
	if [ -n "$cluster_dir" ]; then
		OLM_RS_CLUSTER_DIR=$cluster_dir hack/cluster.sh down || status=1
	fi
	exit "$status"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

if [ -z "${KUBECONFIG:-}" ]; then
	cluster_dir=$(mktemp -d "${TMPDIR:-/tmp}/olm-rs-deploy-check.XXXXXX")
	say "starting a fresh control plane in $cluster_dir"
	OLM_RS_CLUSTER_DIR=$cluster_dir OLM_RS_CLUSTER_OWNER_PID=$$ hack/cluster.sh up >&2
	export KUBECONFIG=$cluster_dir/kubeconfig
fi

present=$(kubectl get crd -o name | grep -E '\.(operators\.coreos\.com|substrate\.olm-rs\.dev)$' || true)
if [ -n "$present" ]; then
	say "this cluster already has olm-rs CRDs, so it cannot show a first install:"
	echo "$present" >&2
	exit 1
fi

while IFS= read -r line; do
	[ -n "${line// /}" ] || continue
	case $line in \#*) continue ;; esac
	say "\$ $line"
	if ! bash -euo pipefail -c "$line"; then
		say "FAILED the first time on a fresh cluster: $line"
		exit 1
	fi
done <<<"$commands"

say "every object of manifests/ exists:"
kubectl get -k manifests/ >&2
say "ok: the README's deploy commands succeeded the first time"
