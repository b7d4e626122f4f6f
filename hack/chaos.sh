#!/usr/bin/env bash
# The chaos campaign (e2e/src/bin/olm-rs-chaos.rs): two replicas of each operator as processes, a
# registry, a stream of installs, upgrades, approvals and uninstalls, and faults at random moments
# from a seeded random source; prints the seed, the faults by kind, the invariant violations and
# the time to converge after each fault. Exits non-zero on any invariant violation.
#
#   hack/chaos.sh [--seed N] [--faults N] [--namespaces N]   (defaults: the clock, 100, 4)
#   hack/chaos.sh --only KIND [...]                           (faults of one kind: apiserver-429s,
#                                                              sigkill-replica, catalog-down, ...)
#   hack/chaos.sh --short                                     (CI: seed 1, 4 faults, 3 namespaces,
#                                                              no API server restart)
#
# Against the cluster in KUBECONFIG (API server restarts only when OLM_RS_RESTART_APISERVER names
# a command that restarts it), or, when KUBECONFIG is unset, a private local control plane
# (hack/cluster.sh), torn down when this script ends.
set -euo pipefail

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$repo"

args=("$@")
short=false
if [ "${1:-}" = "--short" ]; then
	short=true
	args=(--seed 1 --faults 4 --namespaces 3)
fi

cargo build -q -p e2e --bin olm-rs-chaos -p olm-operator -p catalog-operator

cluster_dir=
cleanup() {
	local status=$?
	if [ -n "$cluster_dir" ]; then
		OLM_RS_CLUSTER_DIR=$cluster_dir "$repo/hack/cluster.sh" down || status=1
	fi
	exit "$status"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

if [ -z "${KUBECONFIG:-}" ]; then
	cluster_dir=$(mktemp -d "${TMPDIR:-/tmp}/olm-rs-chaos-cluster.XXXXXX")
	OLM_RS_CLUSTER_DIR=$cluster_dir OLM_RS_CLUSTER_OWNER_PID=$$ "$repo/hack/cluster.sh" up >&2
	export KUBECONFIG=$cluster_dir/kubeconfig
	# The short campaign (CI's) restarts no API server: after a restart, the local control
	# plane's kube-controller-manager (v1.36) now and then stops writing ReplicaSet statuses for
	# minutes ("read version ... is not as new as written version"), so Deployments never turn
	# Available and a run fails for the control plane's sake. The full campaign restarts it.
	if [ "$short" = false ]; then
		export OLM_RS_RESTART_APISERVER="OLM_RS_CLUSTER_DIR=$cluster_dir $repo/hack/cluster.sh restart-apiserver"
	fi
fi
RUST_LOG="${RUST_LOG:-warn}" "$repo/target/debug/olm-rs-chaos" "${args[@]}"
