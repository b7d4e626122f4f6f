#!/usr/bin/env bash
# The project's test entry point (`make test`):
#   1. unit tests of every crate except e2e;
#   2. the e2e tests (`cargo test -p e2e`) against a real Kubernetes API server:
#      - KUBECONFIG set: that cluster (e.g. kind); nothing is started or stopped;
#      - KUBECONFIG unset: a fresh control plane from hack/cluster.sh in its own state directory,
#        torn down when this script ends, whether the tests pass, fail or are interrupted.
# Exits non-zero if anything fails. Extra arguments go to both cargo test runs (e.g. -- --nocapture).
set -euo pipefail

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$repo"

echo "test.sh: unit tests" >&2
cargo test --workspace --exclude e2e "$@"

if [ -n "${KUBECONFIG:-}" ]; then
	echo "test.sh: e2e tests against the cluster in KUBECONFIG=$KUBECONFIG" >&2
else
	# A state directory of its own, so that parallel runs, or a cluster started by hand with
	# hack/cluster.sh up, are left alone.
	OLM_RS_CLUSTER_DIR=$(mktemp -d "${TMPDIR:-/tmp}/olm-rs-test-cluster.XXXXXX")
	export OLM_RS_CLUSTER_DIR
	teardown() {
		local status=$?
		trap - EXIT INT TERM
		"$repo/hack/cluster.sh" down || status=1
		exit "$status"
	}
	trap teardown EXIT
	trap 'exit 130' INT
	trap 'exit 143' TERM
	"$repo/hack/cluster.sh" up >&2
	export KUBECONFIG=$OLM_RS_CLUSTER_DIR/kubeconfig
	echo "test.sh: e2e tests against the local control plane" >&2
fi
cargo test -p e2e "$@"
