#!/usr/bin/env bash
# dev-agents.sh — `make dev` with two agents (README, "Two agents on one installation"):
#
#   support    the demo agent
#   research   the openai adapter against the load generator's fake OpenAI-compatible model
#
# It starts the fake model (turnstile-loadtest -serve-chat) and waits until it listens, then runs
# every turnstile role on one port, as make dev does, with TURNSTILE_AGENTS_FILE and
# TURNSTILE_WORKER_AGENTS naming both agents. Ctrl-C or SIGTERM stops both children (turnstile
# drains first) and waits for them; either child exiting on its own stops the other.
#
# Optional variables:
#   TURNSTILE_DEV_BIN         the directory of turnstile and turnstile-loadtest (bin)
#   TURNSTILE_DEV_CHAT_ADDR   the fake model's address (127.0.0.1:8091); the agents file's research
#                             base_url must name it
#   TURNSTILE_AGENTS_FILE     the catalog (examples/agents-dev.yaml)
#   TURNSTILE_WORKER_AGENTS   the agents the worker serves (support,research)
# and turnstile's own TURNSTILE_* variables (TURNSTILE_HTTP_ADDR, TURNSTILE_BROKER_ADDR, …).
set -euo pipefail
# Job control puts each child in a process group of its own: a Ctrl-C reaches this script only,
# which then stops each child once (a second signal would cut turnstile's drain short).
set -m

bin=${TURNSTILE_DEV_BIN:-bin}
chat_addr=${TURNSTILE_DEV_CHAT_ADDR:-127.0.0.1:8091}
export TURNSTILE_AGENTS_FILE=${TURNSTILE_AGENTS_FILE:-examples/agents-dev.yaml}
export TURNSTILE_WORKER_AGENTS=${TURNSTILE_WORKER_AGENTS:-support,research}
export TURNSTILE_MIGRATE=${TURNSTILE_MIGRATE:-auto}

if ! grep -qF "//$chat_addr/" "$TURNSTILE_AGENTS_FILE"; then
	echo "dev-agents: $TURNSTILE_AGENTS_FILE names no base_url on $chat_addr, where the fake model listens" >&2
	exit 2
fi

children=()
# stop sends each child SIGTERM once and waits for it; it fails with the status of a child that
# did not stop cleanly (both exit 0 on SIGTERM; 127 is a child already waited for).
stop() {
	trap - INT TERM
	local pid s rc=0
	for pid in "${children[@]}"; do kill -TERM "$pid" 2>/dev/null || true; done
	for pid in "${children[@]}"; do
		s=0
		wait "$pid" || s=$?
		((s == 0 || s == 127)) || rc=$s
	done
	return "$rc"
}
trap 'rc=0; stop || rc=$?; exit "$rc"' INT TERM

# A coprocess, so the script reads the fake model's "listening ADDR" line.
coproc chat { exec "$bin/turnstile-loadtest" -serve-chat "$chat_addr" -turn-tokens 8 -token-interval 50ms; }
children+=("$chat_PID")
if ! read -r -t 30 word addr <&"${chat[0]}" || [[ $word != listening ]]; then
	echo "dev-agents: the fake model did not start on $chat_addr" >&2
	stop || true
	exit 1
fi
echo "dev-agents: the fake model answers research on http://$addr/v1; starting turnstile" >&2

"$bin/turnstile" &
children+=("$!")

status=0
wait -n || status=$?
echo "dev-agents: a child exited (status $status); stopping the other" >&2
stop || true
exit "$status"
