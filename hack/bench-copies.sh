#!/usr/bin/env bash
# What copied CSVs cost olm-operator (e2e/src/bin/olm-rs-bench-copies.rs): olm-operator as it
# ships (profile dist), with N namespaces and the scale bench's five AllNamespaces
# operators created directly from the corpus (one copy per operator and namespace), against the
# cluster in KUBECONFIG, or, when it is unset, a private local control plane (hack/cluster.sh)
# torn down when this script ends. Prints the writes while the copies follow the operators'
# install, the requests at rest, and RSS and requests after a restart.
#
#   hack/bench-copies.sh [--namespaces N] [--packages a,b] [--idle-seconds S] [--timeout-seconds T] [--keep]
#                                          (defaults 1000, the five operators, 60 and 1200)
#
# OLM_OPERATOR=<path> measures that olm-operator binary instead of building one (to compare two
# builds on the same scene). The driver is built in the debug profile: it only drives.
set -euo pipefail

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$repo"

. hack/dist.sh
if [ -z "${OLM_OPERATOR:-}" ]; then
	dist_olm_operator
	OLM_OPERATOR=$OLM_OPERATOR_BIN
fi
cargo build -q -p e2e --bin olm-rs-bench-copies

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
	cluster_dir=$(mktemp -d "${TMPDIR:-/tmp}/olm-rs-bench-copies-cluster.XXXXXX")
	OLM_RS_CLUSTER_DIR=$cluster_dir OLM_RS_CLUSTER_OWNER_PID=$$ "$repo/hack/cluster.sh" up >&2
	export KUBECONFIG=$cluster_dir/kubeconfig
fi
# olm-testkit starts the binary cargo would name for a test of olm-operator.
env "CARGO_BIN_EXE_olm-operator=$OLM_OPERATOR" RUST_LOG="${RUST_LOG:-warn}" \
	"$(dist_dir)/debug/olm-rs-bench-copies" "$@"
