#!/usr/bin/env bash
# The project's test entry point (`make test`):
#   0. the corpus of real OLM data the tests read: ../shared/corpus beside the checkout, or
#      OLM_RS_CORPUS; when neither is there, hack/corpus.sh assembles it from its public git
#      repositories (cached) and OLM_RS_CORPUS is exported to it. hack/corpus-test.sh then tests
#      hack/corpus.sh against local mirrors built from that corpus;
#   1. unit and corpus tests of every crate except e2e;
#   2. against a real Kubernetes API server, the cluster-tier tests of those crates (the ones marked
#      #[ignore = "needs a cluster ..."], run with --ignored), then the e2e tests (`cargo test -p e2e`):
#      - KUBECONFIG set: that cluster (e.g. kind); nothing is started or stopped; the tests that
#        restart or stop an API server fail unless OLM_RS_RESTART_APISERVER names a command that
#        restarts it, and OLM_RS_APISERVER_ENDPOINTS and OLM_RS_CLUSTER_DIR name a second one;
#      - KUBECONFIG unset: a fresh control plane from hack/cluster.sh in its own state directory,
#        torn down when this script ends, whether the tests pass, fail or are interrupted. If this
#        script is killed outright, the control plane notices and stops by itself.
# Exits non-zero if anything fails. Extra arguments go to both cargo test runs (e.g. -- --nocapture).
set -euo pipefail
# Job control: each command below runs as a job in a process group of its own, so that on a signal
# the whole of it (cargo and the test binaries it started) can be stopped at once.
set -m

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$repo"

child=
cluster_dir=
registry_dir=
# Everything cargo test prints is also kept here, so that the failures can be repeated at the end,
# where a reader of a long log (or of its tail, as CI shows it) finds them.
log=$(mktemp "${TMPDIR:-/tmp}/olm-rs-test-log.XXXXXX")
# Runs a command in the background and waits for it: unlike a foreground command, `wait` returns
# as soon as a signal arrives, so the traps below act at once.
run() {
	"$@" &
	child=$!
	local status=0
	wait "$child" || status=$?
	child=
	return "$status"
}
# `cargo test ARGS`, its output also appended to $log.
cargo_test() {
	run bash -c 'set -o pipefail; cargo test --no-fail-fast "$@" 2>&1 | tee -a "$0"' "$log" "$@"
}
# The failure reports of the failed test binaries (from their `failures:` to their result line),
# without stack backtraces, which would push the panic messages out of the last 200 lines.
print_failures() {
	local failures
	failures=$(awk '/^failures:$/ {on = 1} /^stack backtrace:$/ {skip = 1}
		on && !skip {print}
		/^note: Some details are omitted/ {skip = 0} /^test result: FAILED/ {on = 0}' "$log" | tail -n 200)
	[ -n "$failures" ] || return 0
	echo "test.sh: what failed (last 200 lines of the failure reports):" >&2
	echo "$failures" >&2
}
# A build that failed: its error lines and what the linker said, each cut to 300 characters (a
# failed link prints its whole command line first, which would fill a log's tail), and the disk.
print_build_errors() {
	local errors
	errors=$(grep -E '^error|/ld: |collect2|rust-lld|No space left|Killed|signal: ' "$log" | cut -c1-300 | tail -n 40)
	[ -n "$errors" ] || return 0
	echo "test.sh: what the build printed of its errors (each line cut to 300 characters):" >&2
	echo "$errors" >&2
	echo "test.sh: disk: $(df -h . | tail -n 1)" >&2
}
# Each panic of a failed test, with the two lines after it (its message), last of all: a failure
# report can be long (a failed cluster test dumps its namespace), which pushes the panic it
# began with out of the 200 lines above.
print_panics() {
	local panics
	panics=$(grep -E -A2 "panicked at|^test failed in namespace " "$log" | grep -v -E '^note: |^stack backtrace:' |
		cut -c1-300 | tail -n 60)
	[ -n "$panics" ] || return 0
	echo "test.sh: the panics of the failed tests (each with two lines after it, cut to 300 characters):" >&2
	echo "$panics" >&2
}
cleanup() {
	local status=$?
	trap - EXIT INT TERM
	if [ -n "$child" ]; then
		kill -TERM -- "-$child" 2>/dev/null || true
		wait "$child" 2>/dev/null || true
	fi
	[ "$status" = 0 ] || { print_failures; print_build_errors; print_panics; }
	rm -f "$log"
	if [ -n "$cluster_dir" ]; then
		OLM_RS_CLUSTER_DIR=$cluster_dir "$repo/hack/cluster.sh" down || status=1
	fi
	if [ -n "$registry_dir" ]; then
		OLM_RS_REGISTRY_DIR=$registry_dir "$repo/hack/registry.sh" down || status=1
	fi
	exit "$status"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

if [ -z "${OLM_RS_CORPUS:-}" ] && [ ! -d "$repo/../shared/corpus" ]; then
	echo "test.sh: no corpus at ../shared/corpus and OLM_RS_CORPUS is unset: hack/corpus.sh assembles it" >&2
	OLM_RS_CORPUS=$("$repo/hack/corpus.sh")
	export OLM_RS_CORPUS
fi
echo "test.sh: hack/corpus.sh against local mirrors" >&2
run "$repo/hack/corpus-test.sh"

echo "test.sh: unit tests" >&2
cargo_test --workspace --exclude e2e "$@"

if [ -n "${KUBECONFIG:-}" ]; then
	echo "test.sh: using the cluster in KUBECONFIG=$KUBECONFIG" >&2
else
	# A state directory of its own, so that parallel runs, or a cluster started by hand with
	# hack/cluster.sh up, are left alone.
	cluster_dir=$(mktemp -d "${TMPDIR:-/tmp}/olm-rs-test-cluster.XXXXXX")
	OLM_RS_CLUSTER_DIR=$cluster_dir OLM_RS_CLUSTER_OWNER_PID=$$ run "$repo/hack/cluster.sh" up >&2
	# KUBECONFIG, and OLM_RS_APISERVER_ENDPOINTS: both API servers, for the tests
	# that fail agents over between them.
	eval "$(OLM_RS_CLUSTER_DIR=$cluster_dir "$repo/hack/cluster.sh" env)"
	export KUBECONFIG OLM_RS_APISERVER_ENDPOINTS
	# The control plane's state directory, for the tests that stop and start its second API server.
	export OLM_RS_CLUSTER_DIR=$cluster_dir
	# How the e2e tests restart this control plane's API server (an outage to survive).
	export OLM_RS_RESTART_APISERVER="OLM_RS_CLUSTER_DIR=$cluster_dir $repo/hack/cluster.sh restart-apiserver"
	echo "test.sh: using the local control plane" >&2
fi
# The cluster-tier tests: only the ignored ones, with --ignored added to the test binaries' arguments.
ignored=("$@")
if printf '%s\n' "$@" | grep -qx -- --; then ignored+=(--ignored); else ignored+=(-- --ignored); fi
echo "test.sh: cluster-tier tests of the other crates" >&2
cargo_test --workspace --exclude e2e "${ignored[@]}"
if [ -z "${OLM_RS_REGISTRY_DIR:-}" ]; then
	# The OCI registry the bundle image tests push to and pull from, stopped with this script.
	registry_dir=$(mktemp -d "${TMPDIR:-/tmp}/olm-rs-test-registry.XXXXXX")
	export OLM_RS_REGISTRY_DIR=$registry_dir
	OLM_RS_REGISTRY_OWNER_PID=$$ run "$repo/hack/registry.sh" up >&2
fi
echo "test.sh: e2e tests" >&2
cargo_test -p e2e "$@"
