#!/usr/bin/env bash
# A real OCI registry on 127.0.0.1 for olm-rs tests, built from Go modules (hack/registry).
# Repositories under `private/` need the user `olm` and the password in $dir/password (HTTP basic
# authentication); all others are open. Plain HTTP on loopback.
#
#   hack/registry.sh up      build once (cached), start in the background, wait until it serves
#   hack/registry.sh down    stop it and remove its state
#   hack/registry.sh env     print the exports tests read (use: eval "$(hack/registry.sh env)"):
#                              OLM_RS_REGISTRY=127.0.0.1:<port>  OLM_RS_REGISTRY_USER  OLM_RS_REGISTRY_PASSWORD
#
# Environment:
#   OLM_RS_REGISTRY_DIR   state directory (default: ~/.cache/olm-rs/registry-state); one registry per directory
#   OLM_RS_REGISTRY_OWNER_PID  if set at `up`: the registry stops once that process is gone
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
dir=${OLM_RS_REGISTRY_DIR:-${HOME}/.cache/olm-rs/registry-state}
marker=.olm-rs-registry

say() { echo "registry.sh: $*" >&2; }

registry_pid() {
	local pid
	pid=$(cat "$dir/pid" 2>/dev/null) || return 0
	if [ -n "$pid" ] && tr '\0' ' ' 2>/dev/null <"/proc/$pid/cmdline" | grep -q -- "--dir $dir "; then
		echo "$pid"
	fi
}

cmd_up() {
	if [ -n "$(registry_pid)" ] && [ -f "$dir/addr" ]; then
		say "already running at $(cat "$dir/addr"); reusing it"
		return 0
	fi
	cmd_down quiet
	local bin
	bin=$("$here/registry/build.sh")
	mkdir -p "$dir"
	touch "$dir/$marker"
	[ -f "$dir/password" ] || head -c 18 /dev/urandom | base64 | tr -d '/+=' >"$dir/password"
	setsid "$bin/registry" --dir "$dir" --password-file "$dir/password" </dev/null >"$dir/registry.log" 2>&1 &
	local pid=$!
	echo "$pid" >"$dir/pid"
	if [ -n "${OLM_RS_REGISTRY_OWNER_PID:-}" ]; then
		# Stop with the owner (e.g. hack/test.sh), whatever way it ends.
		(
			while kill -0 "$OLM_RS_REGISTRY_OWNER_PID" 2>/dev/null; do sleep 1; done
			kill -TERM "$pid" 2>/dev/null || true
		) </dev/null >/dev/null 2>&1 &
		disown
	fi
	local start=$SECONDS
	until [ -f "$dir/addr" ]; do
		if ! kill -0 "$pid" 2>/dev/null; then
			say "the registry failed to start; its log ($dir/registry.log) ends with:"
			tail -n 20 "$dir/registry.log" >&2 || true
			return 1
		fi
		if [ $((SECONDS - start)) -gt 30 ]; then
			say "not serving after 30s; see $dir/registry.log"
			return 1
		fi
		sleep 0.1
	done
	say "serving at $(cat "$dir/addr") (private repositories: private/*, user olm)"
}

cmd_down() {
	local pid
	pid=$(registry_pid)
	if [ -n "$pid" ]; then
		kill -TERM "$pid" 2>/dev/null || true
		local i
		for ((i = 0; i < 50; i++)); do
			kill -0 "$pid" 2>/dev/null || break
			sleep 0.1
		done
		kill -KILL "$pid" 2>/dev/null || true
	fi
	if [ -d "$dir" ]; then
		if [ -f "$dir/$marker" ] || [ -z "$(ls -A "$dir")" ]; then
			rm -rf "$dir"
		else
			say "not removing $dir: it is not a test registry directory (no $marker)"
			return 1
		fi
	fi
	[ "${1:-}" = quiet ] || say "stopped"
}

cmd_env() {
	if [ -z "$(registry_pid)" ] || [ ! -f "$dir/addr" ]; then
		say "no test registry is running in $dir; start one with: $here/registry.sh up"
		return 1
	fi
	echo "export OLM_RS_REGISTRY=$(cat "$dir/addr") OLM_RS_REGISTRY_USER=olm OLM_RS_REGISTRY_PASSWORD=$(cat "$dir/password")"
}

case "${1:-}" in
up) cmd_up ;;
down) cmd_down ;;
env) cmd_env ;;
build) "$here/registry/build.sh" ;;
*)
	echo "usage: $0 up|down|env|build" >&2
	exit 2
	;;
esac
