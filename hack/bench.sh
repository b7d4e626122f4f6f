#!/usr/bin/env bash
# The HA and delivery figures (e2e/src/bin/olm-rs-bench.rs): both binaries as they ship (profile
# dist), run as processes, against the cluster in KUBECONFIG, or, when it is unset, a private
# local control plane (hack/cluster.sh) torn down when this script ends. Prints RSS idle and after N operators, the
# Subscription -> Succeeded time (median and worst of N installs) and failover times.
#
#   hack/bench.sh [--installs N]      (default 20)
set -euo pipefail

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$repo"

# The operators as they ship (hack/dist.sh); the bench itself as a plain release build.
. hack/dist.sh
dist_olm_operator
dist_catalog_operator
cargo build -q --release -p e2e --bin olm-rs-bench
target=$(dist_dir)

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
	cluster_dir=$(mktemp -d "${TMPDIR:-/tmp}/olm-rs-bench-cluster.XXXXXX")
	OLM_RS_CLUSTER_DIR=$cluster_dir OLM_RS_CLUSTER_OWNER_PID=$$ "$repo/hack/cluster.sh" up >&2
	export KUBECONFIG=$cluster_dir/kubeconfig
fi
env "CARGO_BIN_EXE_olm-operator=$OLM_OPERATOR_BIN" \
	"CARGO_BIN_EXE_catalog-operator=$CATALOG_OPERATOR_BIN" \
	RUST_LOG="${RUST_LOG:-warn}" "$target/release/olm-rs-bench" "$@"
