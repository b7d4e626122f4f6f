#!/usr/bin/env bash
# The demo (`make demo`): olm-rs installs an operator with a dependency from
# the demo catalog, on a real control plane; then an operator with the machine
# strategy on a MachinePool of two machines (hack/demo-machines.sh); then two
# machine operators related to each other (hack/demo-relations.sh).
#
#   hack/demo.sh        start everything and walk through the install
#   hack/demo.sh down   stop the operators, the registry server, and the
#                       control plane if this script started it
#
# With KUBECONFIG set, the demo uses that cluster (kind, for example) and
# starts no control plane. Without it, it starts the local one
# (hack/cluster.sh, built from Go modules on first use). The operators and
# the demo catalog's registry server run as local processes; their logs are in
# $OLM_RS_DEMO_DIR (default ~/.cache/olm-rs/demo).
set -euo pipefail
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$repo"
state=${OLM_RS_DEMO_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/olm-rs/demo}
port=${OLM_RS_DEMO_PORT:-50051}
namespace=${OLM_RS_DEMO_NAMESPACE:-demo}

stop() {
	local pidfile
	for pidfile in "$state"/*.pid; do
		[ -e "$pidfile" ] || continue
		kill "$(cat "$pidfile")" 2>/dev/null || true
		rm -f "$pidfile"
	done
	if [ -e "$state/started-cluster" ]; then
		hack/cluster.sh down
		rm -f "$state/started-cluster"
	fi
}

if [ "${1:-}" = down ]; then
	stop
	echo "demo: stopped" >&2
	exit 0
fi

mkdir -p "$state"
stop # a previous demo's processes, if any

if [ -z "${KUBECONFIG:-}" ]; then
	echo "==> starting the local control plane (the first start builds it from Go modules: 6 to 16 min)" >&2
	if ! hack/cluster.sh status >/dev/null 2>&1; then
		touch "$state/started-cluster"
	fi
	hack/cluster.sh up >&2
	eval "$(hack/cluster.sh env)"
fi
export KUBECONFIG
echo "==> using the cluster in KUBECONFIG=$KUBECONFIG" >&2

echo "==> building olm-rs (debug build; the first one on a machine takes 5 to 15 min, later ones seconds)" >&2
cargo build -q --bins -p olm-operator -p catalog-operator -p e2e -p machine-agent -p kubectl-olm
bin=$(cargo metadata --format-version 1 --no-deps | sed -n 's/.*"target_directory":"\([^"]*\)".*/\1/p')/debug

start() { # name, command...
	local name=$1
	shift
	"$@" >"$state/$name.log" 2>&1 &
	echo $! >"$state/$name.pid"
}
export OLM_LOG_FORMAT=text
start registry "$bin/catalog-operator" serve catalogs/demo-bundles --address 127.0.0.1 --port "$port"
start olm-operator "$bin/olm-operator" --admin-addr 127.0.0.1:18080 --lease-namespace default
start catalog-operator "$bin/catalog-operator" run --admin-addr 127.0.0.1:18081 --lease-namespace default
echo "==> started the demo catalog's registry server on 127.0.0.1:$port, olm-operator and catalog-operator (logs: $state)" >&2

if ! "$bin/olm-rs-demo" "127.0.0.1:$port" "$namespace"; then
	echo "demo: failed; the logs in $state say more. Stop everything with: hack/demo.sh down" >&2
	exit 1
fi
if ! hack/demo-machines.sh "$state" "$bin" "$namespace"; then
	echo "demo: the machine part failed; the logs in $state say more. Stop everything with: hack/demo.sh down" >&2
	exit 1
fi
if ! hack/demo-relations.sh "$bin" "$namespace"; then
	echo "demo: the relation part failed; the logs in $state say more. Stop everything with: hack/demo.sh down" >&2
	exit 1
fi

cat <<EOT

Look around (the operators keep running):
  export KUBECONFIG=$KUBECONFIG
  kubectl get catalogsources,subscriptions,installplans,clusterserviceversions -n $namespace
  kubectl get deployments -n $namespace
  kubectl get machinepools,machines,relations,databags -n $namespace -o wide
  $bin/kubectl-olm status -n $namespace
  kubectl describe subscription demo-app -n $namespace
  curl -s 127.0.0.1:18080/metrics | grep csv_
Try a dependency that cannot be met:
  kubectl create -n $namespace -f - <<<'{"apiVersion":"operators.coreos.com/v1alpha1","kind":"Subscription","metadata":{"name":"demo-broken"},"spec":{"name":"demo-broken","source":"olm-rs-demo","sourceNamespace":"$namespace"}}'
  kubectl get subscription demo-broken -n $namespace -o jsonpath='{.status.conditions}'
Offline, without a cluster:
  $bin/catalog-operator resolve --catalog demo=catalogs/demo-bundles demo-app demo-broken
Tear down:
  hack/demo.sh down
EOT
