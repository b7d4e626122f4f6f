#!/usr/bin/env bash
# The scale figures (e2e/src/bin/olm-rs-bench-scale.rs): both binaries as they ship (profile dist), run as
# processes, with 1,000 namespaces, 5 corpus CatalogSources and 20 operators installed, against
# the cluster in KUBECONFIG, or, when it is unset, a private local control plane (hack/cluster.sh)
# torn down when this script ends. Prints, for each binary, RSS idle, CPU seconds and API requests
# per minute at rest, the time from a restart to /readyz, RSS after it and RSS with 1,000 more
# namespaces, with the machine load at the time.
#
#   hack/bench-scale.sh [--namespaces N] [--idle-seconds S]   (defaults 1000 and 600)
#
# `--idle-seconds 120` is a quick run.
set -euo pipefail

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$repo"

# The operators as they ship (hack/dist.sh); the bench itself as a plain release build.
. hack/dist.sh
dist_olm_operator
dist_catalog_operator
cargo build -q --release -p e2e --bin olm-rs-bench-scale
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
	cluster_dir=$(mktemp -d "${TMPDIR:-/tmp}/olm-rs-bench-scale-cluster.XXXXXX")
	OLM_RS_CLUSTER_DIR=$cluster_dir OLM_RS_CLUSTER_OWNER_PID=$$ "$repo/hack/cluster.sh" up >&2
	export KUBECONFIG=$cluster_dir/kubeconfig
fi
env "CARGO_BIN_EXE_olm-operator=$OLM_OPERATOR_BIN" \
	"CARGO_BIN_EXE_catalog-operator=$CATALOG_OPERATOR_BIN" \
	RUST_LOG="${RUST_LOG:-warn}" "$target/release/olm-rs-bench-scale" "$@"
