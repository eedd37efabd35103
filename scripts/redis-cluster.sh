#!/usr/bin/env bash
# redis-cluster.sh — a throwaway Redis Cluster of masters on loopback, for tests and local trials.
#
#   scripts/redis-cluster.sh start DIR PORT PORT PORT...   start one master per port, create the cluster,
#                                                         wait until every node reports cluster_state:ok,
#                                                         print the comma list for TURNSTILE_REDIS_CLUSTER_ADDRS
#   scripts/redis-cluster.sh stop DIR                     stop the nodes started in DIR
#
# Each node also uses PORT+10000 for the cluster bus. Nothing is persisted (no RDB, no AOF).
set -euo pipefail

usage() { sed -n '2,9p' "$0" >&2; exit 2; }
[[ $# -ge 2 ]] || usage
cmd=$1 dir=$2
shift 2

stop() {
	for pidfile in "$dir"/*/redis.pid; do
		[[ -f $pidfile ]] || continue
		pid=$(cat "$pidfile")
		kill "$pid" 2>/dev/null || true
		for _ in $(seq 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.05; done
		rm -f "$pidfile"
	done
}

case $cmd in
start)
	[[ $# -ge 3 ]] || { echo "redis-cluster.sh: need at least 3 ports" >&2; exit 2; }
	mkdir -p "$dir"
	addrs=()
	for p in "$@"; do
		mkdir -p "$dir/$p"
		redis-server --port "$p" --bind 127.0.0.1 --protected-mode no \
			--cluster-enabled yes --cluster-config-file "$dir/$p/nodes.conf" --cluster-node-timeout 5000 \
			--dir "$dir/$p" --save '' --appendonly no \
			--daemonize yes --pidfile "$dir/$p/redis.pid" --logfile "$dir/$p/redis.log"
		addrs+=("127.0.0.1:$p")
	done
	trap 'stop' ERR
	for p in "$@"; do
		for i in $(seq 200); do
			redis-cli -p "$p" ping >/dev/null 2>&1 && break
			[[ $i -lt 200 ]] || { echo "redis-cluster.sh: node $p did not answer" >&2; exit 1; }
			sleep 0.05
		done
	done
	redis-cli --cluster create "${addrs[@]}" --cluster-replicas 0 --cluster-yes >"$dir/create.log" 2>&1 ||
		{ cat "$dir/create.log" >&2; exit 1; }
	for p in "$@"; do
		for i in $(seq 400); do
			redis-cli -p "$p" cluster info 2>/dev/null | grep -q '^cluster_state:ok' && break
			[[ $i -lt 400 ]] || { echo "redis-cluster.sh: node $p never reached cluster_state:ok" >&2; exit 1; }
			sleep 0.05
		done
	done
	(IFS=,; echo "${addrs[*]}")
	;;
stop)
	stop
	;;
*)
	usage
	;;
esac
