#!/usr/bin/env bash
# After `make demo`: every demo CSV is Succeeded, and still is after a while
# (CI runs this between `make demo` and `make demo-down`).
#
#   hack/demo-check.sh [SECONDS]   how long they must stay Succeeded (default 60)
#
# Uses the cluster in KUBECONFIG, else the local control plane that `make demo`
# started (hack/cluster.sh).
set -euo pipefail
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
namespace=${OLM_RS_DEMO_NAMESPACE:-demo}
hold=${1:-60}
csvs=(demo-db.v1.1.0 demo-app.v0.2.0 demo-machine.v1.1.0 demo-store.v1.0.0 demo-shop.v1.0.0)
say() { echo "demo-check: $*" >&2; }

if [ -z "${KUBECONFIG:-}" ]; then
	eval "$("$repo/hack/cluster.sh" env)"
	export KUBECONFIG
fi

# Fails, naming each CSV that is not Succeeded, with its phase and message.
all_succeeded() {
	local csv phase failed=0
	for csv in "${csvs[@]}"; do
		phase=$(kubectl get -n "$namespace" csv "$csv" -o jsonpath='{.status.phase}' 2>/dev/null || echo missing)
		if [ "$phase" != Succeeded ]; then
			say "$csv is $phase: $(kubectl get -n "$namespace" csv "$csv" -o jsonpath='{.status.message}' 2>/dev/null || true)"
			failed=1
		fi
	done
	return "$failed"
}

all_succeeded || exit 1
say "ok: ${csvs[*]} Succeeded; checking that they stay so for ${hold}s"
end=$((SECONDS + hold))
while [ "$SECONDS" -lt "$end" ]; do
	sleep 10
	all_succeeded || exit 1
done
kubectl get csv -n "$namespace" >&2
say "ok: still Succeeded after ${hold}s"
