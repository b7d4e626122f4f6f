#!/usr/bin/env bash
# A real Kubernetes control plane on 127.0.0.1 for olm-rs tests, built from Go modules
# (hack/testcluster): etcd, kube-apiserver, kube-controller-manager, kube-scheduler and kwok fake nodes.
#
#   hack/cluster.sh up       build once (cached), start in the background, wait until ready
#   hack/cluster.sh down     stop every process it started and remove its state
#   hack/cluster.sh env      print `export KUBECONFIG=...` and `export OLM_RS_APISERVER_ENDPOINTS=...`
#                            (both API servers) (use: eval "$(hack/cluster.sh env)")
#   hack/cluster.sh status   say whether it runs, and where
#   hack/cluster.sh check    fail unless every fake node is Ready with a Lease renewed in the last 40s
#                            (`up` runs it too, also when it reuses a running control plane)
#   hack/cluster.sh restart-apiserver
#                            stop kube-apiserver and start it again (an outage for tests to survive);
#                            returns once it is ready again
#   hack/cluster.sh stop-apiserver-2 | start-apiserver-2
#                            stop or start the second kube-apiserver (same etcd, another port, used
#                            by nothing but clients that fail over between servers; the other
#                            components and KUBECONFIG use the first); returns once done
#   hack/cluster.sh build    only build (or find) the binaries; print their directory
#
# Environment:
#   OLM_RS_CLUSTER_DIR    state directory (default: ~/.cache/olm-rs/cluster): PKI, etcd data, logs,
#                         kubeconfig. One cluster per directory.
#   OLM_RS_CLUSTER_NODES  number of fake nodes (default 2)
#   OLM_RS_CLUSTER_OWNER_PID  if set at `up`: the control plane stops by itself, and removes its
#                         state, once that process is gone (hack/test.sh passes its own pid)
#   XDG_CACHE_HOME        binaries go to ${XDG_CACHE_HOME:-~/.cache}/olm-rs/testcluster/<key>/bin
#   GO                    the go binary (Go >= 1.26), if not on PATH or at /usr/local/go/bin/go
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
dir=${OLM_RS_CLUSTER_DIR:-${HOME}/.cache/olm-rs/cluster}
nodes=${OLM_RS_CLUSTER_NODES:-2}
# A file that marks a directory as ours, so that `down` never removes anything else.
marker=.olm-rs-testcluster

say() { echo "cluster.sh: $*" >&2; }

# pid of the running supervisor, or nothing.
supervisor_pid() {
	local pid
	pid=$(cat "$dir/supervisor.pid" 2>/dev/null) || return 0
	# The pid must still be our supervisor, not a process that reused the number.
	if [ -n "$pid" ] && tr '\0' ' ' 2>/dev/null <"/proc/$pid/cmdline" | grep -q -- "testcluster up --dir $dir "; then
		echo "$pid"
	fi
}

is_ready() {
	[ -n "$(supervisor_pid)" ] && [ -f "$dir/ready" ]
}

print_usage() {
	cat <<EOF
The test control plane is running ($(sed -n 's/^server=//p' "$dir/ready")).
Use it with:
  export KUBECONFIG=$dir/kubeconfig
Logs: $dir/logs/   Stop it: $here/cluster.sh down
EOF
}

cmd_up() {
	if is_ready; then
		say "already running; reusing it"
		cmd_check
		print_usage
		return 0
	fi
	local pid
	pid=$(supervisor_pid)
	if [ -z "$pid" ]; then
		# Nothing of ours runs: clear whatever a crashed run left, then start afresh.
		cmd_down quiet
		local bin
		bin=$("$here/testcluster/build.sh")
		mkdir -p "$dir"
		touch "$dir/$marker"
		say "starting the control plane in $dir"
		# setsid: a Ctrl-C in this terminal must not reach the cluster; `down` stops it.
		local args=(--dir "$dir" --bin "$bin" --nodes "$nodes")
		[ -z "${OLM_RS_CLUSTER_OWNER_PID:-}" ] || args+=(--owner-pid "$OLM_RS_CLUSTER_OWNER_PID")
		setsid "$bin/testcluster" up "${args[@]}" </dev/null >"$dir/testcluster.log" 2>&1 &
		pid=$!
		echo "$pid" >"$dir/supervisor.pid"
	else
		say "another \`up\` is starting it (pid $pid); waiting"
	fi
	local start=$SECONDS
	until [ -f "$dir/ready" ]; do
		if ! kill -0 "$pid" 2>/dev/null; then
			say "the control plane failed to start; its log ($dir/testcluster.log) ends with:"
			tail -n 40 "$dir/testcluster.log" >&2 || true
			say "component logs: $dir/logs/"
			return 1
		fi
		if [ $((SECONDS - start)) -gt 300 ]; then
			say "not ready after 300s; see $dir/testcluster.log and $dir/logs/"
			return 1
		fi
		sleep 0.2
	done
	say "ready after $((SECONDS - start))s"
	cmd_check
	print_usage
}

# `down [quiet]`: quiet leaves out the final "stopped".
cmd_down() {
	local pid
	pid=$(supervisor_pid)
	if [ -n "$pid" ]; then
		# The supervisor stops the components in order on SIGTERM.
		kill -TERM "$pid" 2>/dev/null || true
		local i
		for ((i = 0; i < 150; i++)); do
			kill -0 "$pid" 2>/dev/null || break
			sleep 0.2
		done
		if kill -0 "$pid" 2>/dev/null; then
			say "supervisor $pid did not stop within 30s; killing it"
			kill -KILL "$pid" 2>/dev/null || true
		fi
	fi
	# Anything still alive from the pids file (e.g. the supervisor was SIGKILLed on a system
	# without Pdeathsig) is killed, if its command line still points into this directory.
	if [ -f "$dir/pids" ]; then
		local cpid name
		while read -r cpid name; do
			if tr '\0' ' ' 2>/dev/null <"/proc/$cpid/cmdline" | grep -qF -- "$dir/"; then
				say "killing leftover $name (pid $cpid)"
				kill -KILL "$cpid" 2>/dev/null || true
			fi
		done <"$dir/pids"
	fi
	if [ -d "$dir" ]; then
		if [ -f "$dir/$marker" ] || [ -z "$(ls -A "$dir")" ]; then
			rm -rf "$dir"
		else
			say "not removing $dir: it is not a test cluster directory (no $marker)"
			return 1
		fi
	fi
	[ "${1:-}" = quiet ] || say "stopped"
}

cmd_env() {
	if ! is_ready; then
		say "no test control plane is running in $dir; start one with: $here/cluster.sh up"
		return 1
	fi
	echo "export KUBECONFIG=$dir/kubeconfig"
	local first second
	first=$(sed -n 's/^server=//p' "$dir/ready")
	second=$(sed -n 's/^server2=//p' "$dir/ready")
	echo "export OLM_RS_APISERVER_ENDPOINTS=$first${second:+,$second}"
}

# `second_apiserver stopped|running`: asks the supervisor to toggle the second kube-apiserver
# (SIGUSR2) unless it is in that state already, and waits until it is.
second_apiserver() {
	local want=$1 pid start=$SECONDS
	if ! is_ready; then
		say "no test control plane is running in $dir; start one with: $here/cluster.sh up"
		return 1
	fi
	[ "$(cat "$dir/apiserver-2" 2>/dev/null || echo running)" != "$want" ] || return 0
	pid=$(supervisor_pid)
	rm -f "$dir/apiserver-2"
	kill -USR2 "$pid"
	until [ "$(cat "$dir/apiserver-2" 2>/dev/null)" = "$want" ]; do
		if ! kill -0 "$pid" 2>/dev/null || [ $((SECONDS - start)) -gt 150 ]; then
			say "the second kube-apiserver is not $want; see $dir/testcluster.log and $dir/logs/kube-apiserver-2.log"
			return 1
		fi
		sleep 0.2
	done
	say "the second kube-apiserver is $want"
}

# Nodes that are not Ready, or whose Lease is stale, take every Pod on them NotReady, and with it
# the Deployments of whatever runs there: a cluster in that state must not pass for a working one.
cmd_check() {
	if ! is_ready; then
		say "no test control plane is running in $dir; start one with: $here/cluster.sh up"
		return 1
	fi
	# The supervisor notes its binaries and node count in the ready file; one started before it did
	# gets the binaries of these sources and the configured count.
	local bin want
	bin=$(sed -n 's/^bin=//p' "$dir/ready")
	[ -n "$bin" ] || bin=$("$here/testcluster/build.sh")
	want=$(sed -n 's/^nodes=//p' "$dir/ready")
	if ! "$bin/testcluster" check --kubeconfig "$dir/kubeconfig" --nodes "${want:-$nodes}"; then
		say "the control plane in $dir runs, but its fake nodes are unhealthy; see $dir/logs/kwok.log" \
			"and $dir/logs/kube-controller-manager.log, and start afresh with: $here/cluster.sh down && $here/cluster.sh up"
		return 1
	fi
}

cmd_status() {
	local pid
	pid=$(supervisor_pid)
	if [ -z "$pid" ]; then
		echo "not running (state directory: $dir)"
		return 3
	fi
	if [ ! -f "$dir/ready" ]; then
		echo "starting (supervisor pid $pid, log $dir/testcluster.log)"
		return 0
	fi
	echo "running: supervisor pid $pid, $(sed -n 's/^server=//p' "$dir/ready"), KUBECONFIG=$dir/kubeconfig"
	local cpid name
	while read -r cpid name; do
		if kill -0 "$cpid" 2>/dev/null; then
			echo "  $name: pid $cpid, log $dir/logs/$name.log"
		else
			echo "  $name: pid $cpid EXITED, log $dir/logs/$name.log"
		fi
	done <"$dir/pids"
}

cmd_restart_apiserver() {
	if ! is_ready; then
		say "no test control plane is running in $dir; start one with: $here/cluster.sh up"
		return 1
	fi
	local pid before after start=$SECONDS
	pid=$(supervisor_pid)
	before=$(cat "$dir/apiserver-restarts" 2>/dev/null || echo 0)
	# The supervisor restarts kube-apiserver on SIGUSR1 and counts the restarts in that file.
	kill -USR1 "$pid"
	while :; do
		after=$(cat "$dir/apiserver-restarts" 2>/dev/null || echo 0)
		[ "$after" = "$before" ] || break
		if ! kill -0 "$pid" 2>/dev/null; then
			say "the control plane stopped during the restart; its log ($dir/testcluster.log) ends with:"
			tail -n 20 "$dir/testcluster.log" >&2 || true
			return 1
		fi
		if [ $((SECONDS - start)) -gt 150 ]; then
			say "kube-apiserver not ready again after 150s; see $dir/logs/kube-apiserver.log"
			return 1
		fi
		sleep 0.2
	done
	say "kube-apiserver restarted and ready after $((SECONDS - start))s"
}

case "${1:-}" in
up) cmd_up ;;
down) cmd_down ;;
env) cmd_env ;;
status) cmd_status ;;
check) cmd_check ;;
restart-apiserver) cmd_restart_apiserver ;;
stop-apiserver-2) second_apiserver stopped ;;
start-apiserver-2) second_apiserver running ;;
build) "$here/testcluster/build.sh" ;;
*)
	sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//' >&2
	exit 2
	;;
esac
