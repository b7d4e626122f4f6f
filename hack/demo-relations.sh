#!/usr/bin/env bash
# The relation part of the demo (run by hack/demo.sh after hack/demo-machines.sh, on its
# MachinePool edge and agents): demo-store, a key-value store on machines, provides the
# endpoint db (interface kv); demo-shop requires one, and its units say blocked "needs a
# database" until it is related. Both are installed from the catalog, related as a user does
# (kubectl olm relate demo-shop demo-store), and demo-shop's units become active with the host
# and port that the store's unit gave them through the relation; then kubectl olm status.
#
# Arguments: the bin directory, the namespace.
set -euo pipefail
bin=$1 namespace=$2
say() { echo "==> $*" >&2; }

# Each Machine, with the state and message of its unit of CSV $1: a line each.
units_of() {
	kubectl get machines -n "$namespace" -o jsonpath="{range .items[*]}{.metadata.name}{range .status.units[?(@.csv==\"$1\")]} {.state}: {.message}{end}{\"\n\"}{end}"
}

# Waits up to $2 seconds until every Machine's unit of CSV $1 is in state $3.
wait_units() {
	local csv=$1 limit=$2 state=$3 lines
	for _ in $(seq 1 "$limit"); do
		lines=$(units_of "$csv")
		if [ -n "$lines" ] && ! grep -qv " $state: " <<<"$lines"; then
			return 0
		fi
		sleep 1
	done
	say "the units of $csv are not all $state after ${limit}s:"
	sed 's/^/    /' <<<"$lines" >&2
	return 1
}

say "subscribing to demo-store (provides db, interface kv) and demo-shop (requires a kv database)"
for package in demo-store demo-shop; do
	kubectl apply -n "$namespace" -f - >&2 <<EOT
apiVersion: operators.coreos.com/v1alpha1
kind: Subscription
metadata:
  name: $package
spec:
  name: $package
  channel: stable
  source: olm-rs-demo
  sourceNamespace: $namespace
EOT
done
for csv in demo-store.v1.0.0 demo-shop.v1.0.0; do
	for _ in $(seq 1 300); do
		kubectl get -n "$namespace" "csv/$csv" >/dev/null 2>&1 && break
		sleep 1
	done
	kubectl wait -n "$namespace" "csv/$csv" --for=jsonpath='{.status.phase}'=Succeeded --timeout=300s >&2
done
wait_units demo-shop.v1.0.0 60 blocked
say "installed; demo-shop waits for its user, as a Juju unit does (unit state: message):"
units_of demo-shop.v1.0.0 | sed 's/^/    /' >&2

say "relating them, as a user does: kubectl olm relate demo-shop demo-store"
"$bin/kubectl-olm" relate demo-shop demo-store -n "$namespace" >&2
wait_units demo-shop.v1.0.0 120 active
say "related: each demo-shop unit uses the host and port the store's unit set (unit state: message):"
units_of demo-shop.v1.0.0 | sed 's/^/    /' >&2

say "kubectl olm status"
"$bin/kubectl-olm" status -n "$namespace" >&2
