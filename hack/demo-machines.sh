#!/usr/bin/env bash
# The machine half of the demo (run by hack/demo.sh, after the operators and
# the demo catalog are up): a MachinePool of the fake nodes, two machine agents
# playing the agent DaemonSet's pods (local processes, each with a token bound
# to its pod and its own state directory), and demo-machine installed from
# the catalog: 1.0.0, then upgraded to 1.1.0, with its hooks run on both; then
# its action backup, run on both with kubectl olm run.
#
# Arguments: the demo's state directory, the bin directory, the namespace.
# Environment: OLM_RS_DEMO_NODE_SELECTOR (default type=kwok, the fake nodes of
# hack/cluster.sh).
set -euo pipefail
state=$1 bin=$2 namespace=$3
selector=${OLM_RS_DEMO_NODE_SELECTOR:-type=kwok}
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
say() { echo "==> $*" >&2; }

# Where the agents keep their state. An agent that runs as root runs the hooks
# of unprivileged units as nobody, and those hooks work in the state directory,
# so every directory above it must let others pass. A home directory need not
# (root's is 0700 on Debian): as root, the demo's agents keep their state where
# a node's agent keeps it, under /var/lib. As another user, hooks run as that
# user, and the demo's own directory serves.
if [ "$(id -u)" = 0 ]; then
	agents=${OLM_RS_DEMO_AGENTS_DIR:-/var/lib/olm-rs-demo}
else
	agents=${OLM_RS_DEMO_AGENTS_DIR:-$state}
fi
mkdir -p "$agents"

say "the admission policy that keeps each agent to its own Machine and Lease"
kubectl apply -f "$repo/manifests/machine-agent-policy.yaml" >&2
key=${selector%%=*} value=${selector#*=}
kubectl apply -n "$namespace" -f - >&2 <<EOT
apiVersion: substrate.olm-rs.dev/v1alpha1
kind: MachinePool
metadata:
  name: edge
spec:
  nodeSelector: {"$key": "$value"}
  agent: {image: ghcr.io/olm-rs/machine-agent, version: 0.1.0}
  upgrade: {maxUnavailable: 1}
EOT
say "MachinePool edge on the nodes labelled $selector: olm-operator runs the agent DaemonSet there"
for _ in $(seq 1 120); do
	pods=$(kubectl get pods -n "$namespace" -l substrate.olm-rs.dev/pool=edge \
		-o jsonpath='{range .items[?(@.spec.nodeName)]}{.metadata.name} {.metadata.uid} {.spec.nodeName}{"\n"}{end}')
	[ "$(grep -c . <<<"$pods")" -ge 2 ] && break
	sleep 1
done
server=$(kubectl config view --minify --raw -o jsonpath='{.clusters[0].cluster.server}')
ca=$(kubectl config view --minify --raw -o jsonpath='{.clusters[0].cluster.certificate-authority-data}')
port=18100
while read -r pod uid node; do
	[ -n "$pod" ] || continue
	port=$((port + 1))
	token=$(kubectl create token machine-agent-edge -n "$namespace" --duration 24h \
		--bound-object-kind Pod --bound-object-name "$pod" --bound-object-uid "$uid")
	cat >"$state/agent-$node.kubeconfig" <<EOT
apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: "$server", certificate-authority-data: "$ca"}}]
users: [{name: u, user: {token: "$token"}}]
contexts: [{name: c, context: {cluster: c, user: u, namespace: "$namespace"}}]
current-context: c
EOT
	# A new pool: whatever an earlier demo's agent left for this node goes.
	rm -rf "${agents:?}/agent-$node"
	OLM_LOG_FORMAT=text "$bin/machine-agent" run --kubeconfig "$state/agent-$node.kubeconfig" \
		--namespace "$namespace" --pool edge --node-name "$node" --state-dir "$agents/agent-$node" \
		--admin-addr "127.0.0.1:$port" >"$state/agent-$node.log" 2>&1 &
	echo $! >"$state/agent-$node.pid"
	say "machine agent of node $node started as pod $pod would run it (state $agents/agent-$node, log $state/agent-$node.log)"
done <<<"$pods"
if ! kubectl wait -n "$namespace" machinepool/edge --for=jsonpath='{.status.readyMachines}'=2 --timeout=120s >&2; then
	for log in "$state"/agent-*.log; do
		say "the last lines of $log:"
		tail -n 5 "$log" | sed 's/^/    /' >&2
	done
	exit 1
fi
kubectl get machinepools,machines -n "$namespace" >&2

say "subscribing to demo-machine 1.0.0 (strategy machine): its hooks run on every machine, then the upgrade to 1.1.0"
kubectl apply -n "$namespace" -f - >&2 <<EOT
apiVersion: operators.coreos.com/v1alpha1
kind: Subscription
metadata:
  name: demo-machine
spec:
  name: demo-machine
  channel: stable
  source: olm-rs-demo
  sourceNamespace: $namespace
  startingCSV: demo-machine.v1.0.0
  config:
    env: [{name: greeting, value: "hello from the Subscription"}]
EOT
# `kubectl wait` fails at once on an object that does not exist yet: the CSV
# appears only after catalog-operator resolved the Subscription and applied
# its InstallPlan, which takes a while on a loaded machine.
for _ in $(seq 1 300); do
	kubectl get -n "$namespace" csv/demo-machine.v1.1.0 >/dev/null 2>&1 && break
	sleep 1
done
kubectl wait -n "$namespace" csv/demo-machine.v1.1.0 --for=jsonpath='{.status.phase}'=Succeeded --timeout=300s >&2
kubectl get csv -n "$namespace" >&2
kubectl get machines -n "$namespace" \
	-o custom-columns='MACHINE:.metadata.name,AGENT:.status.agentVersion,UNIT:.status.units[*].csv,STATE:.status.units[*].state,MESSAGE:.status.units[*].message' >&2
for log in "$agents"/agent-*/units/*/sandbox/hooks.log; do
	[ -f "$log" ] || continue
	machine=${log#"$agents"/agent-}
	say "hooks run on ${machine%%/*}, in order:"
	sed 's/^/    /' "$log" >&2
done

say "demo-machine's action backup on every unit, as a user runs it: kubectl olm run demo-machine backup name=demo --wait"
"$bin/kubectl-olm" run demo-machine backup name=demo --wait --timeout 120 -n "$namespace" >&2
