#!/usr/bin/env bash
# Compare two checkouts of Workly under the same load, alternating runs, and report CPU per task.
#
#   tools/bench/compare.sh BEFORE_DIR AFTER_DIR sqlite|postgres RATE ROUNDS
#
# Each directory is a checkout with its own .venv (python3 -m venv .venv && .venv/bin/pip install .).
# Per round and side: start the server fresh (SQLite in a temporary file, or PostgreSQL database
# workly_compare on 127.0.0.1, recreated), run this checkout's load test at RATE for 20 s after a
# 5 s warm-up, stop the server by PID. Reports the delivery latency and the CPU time (user + system,
# from /proc) of the Workly process and of all PostgreSQL processes, per task delivered.
#
# The load test sends BENCH_TOKEN (servers.sh), a bootstrap token. With BENCH_AUTH=key, each side
# whose server has API keys gets one per round once its server is up (POST /v1/keys, name bench,
# role publisher, made with BENCH_TOKEN), and its enqueues carry that wk_ key instead: the cost of
# a database key on the hot path. A publisher may not create or delete queues, so the load test's
# set-up and clean-up of its queue (GET, PUT, DELETE /v1/queues/loadtest) keep the token, on both
# sides alike. A checkout without keys (404 to /v1/keys) keeps the token. Each round prints which
# credential each side used.
set -euo pipefail
before=$1 after=$2 backend=$3 rate=$4 rounds=$5
here=$(cd "$(dirname "$0")/../.." && pwd)
work=$(mktemp -d)
tck=$(getconf CLK_TCK)
. "$here/tools/bench/servers.sh"
pid=
trap 'if [[ -n $pid ]]; then kill -TERM "$pid" 2>/dev/null || true; fi; rm -rf "$work"' EXIT  # a failed round too
case ${BENCH_AUTH:-} in ''|token|key) ;; *) echo "BENCH_AUTH is token or key, not ${BENCH_AUTH}" >&2; exit 2 ;; esac

# Set $credential (what the load test's enqueues send) and $credential_note for the server on PORT.
choose_credential() {
  local port=$1 status
  credential=$BENCH_TOKEN credential_note="bootstrap token (BENCH_TOKEN)"
  [[ ${BENCH_AUTH:-} == key ]] || return 0
  status=$(curl -s -o "$work/key.json" -w '%{http_code}' -X POST "http://127.0.0.1:$port/v1/keys" \
    -H "authorization: Bearer $BENCH_TOKEN" -H 'content-type: application/json' \
    -d '{"name": "bench", "role": "publisher"}')
  case $status in
    201)
      credential=$(python3 -c 'import json, sys; print(json.load(open(sys.argv[1]))["key"])' "$work/key.json")
      credential_note="API key $(python3 -c 'import json, sys; d = json.load(open(sys.argv[1])); print(d["id"], "role", d["role"])' "$work/key.json") (${credential:0:7}…)"
      ;;
    404) credential_note+=": this checkout has no /v1/keys (404)" ;;
    *) echo "POST /v1/keys answered $status: $(cat "$work/key.json")" >&2; exit 1 ;;
  esac
}

# The load test with the enqueues' credential as -token; under BENCH_AUTH=key the queue's set-up and
# clean-up send BENCH_TOKEN (a publisher key may not make or delete a queue).
loadtest_with_key_env='
import sys
import workly.loadtest.run as run
from tools.loadtest.__main__ import main
admin = {"authorization": "Bearer " + sys.argv[1]}
for name in ("_make_queue", "_delete_queue", "_clean_up"):
    def queue_call(client, test, headers, *rest, _call=getattr(run, name)):
        return _call(client, test, {**headers, **admin}, *rest)
    setattr(run, name, queue_call)
sys.exit(main(sys.argv[2:]))
'
run_loadtest() {
  if [[ ${BENCH_AUTH:-} == key ]]; then
    "$here/.venv/bin/python" -c "$loadtest_with_key_env" "$BENCH_TOKEN" "$@"
  else
    "$here/.venv/bin/python" -m tools.loadtest "$@"
  fi
}
for round in $(seq 1 "$rounds"); do
  for side in before after; do
    dir=$before; [[ $side == after ]] && dir=$after
    port=$((20000 + RANDOM % 20000))
    start_server "$dir" "$backend" "$port" "$work/server.log"
    pid=$server_pid
    choose_credential "$port"
    if [[ -n ${BENCH_AUTH:-} ]]; then printf '%-6s r%s credential: %s\n' "$side" "$round" "$credential_note"; fi
    w0=$(cpu_of "$pid") p0=$(pg_cpu)
    (cd "$here" && run_loadtest -url "http://127.0.0.1:$port" -token "$credential" -rate "$rate" \
      -duration 20s -quiet -json "$work/out.json" >/dev/null)
    w1=$(cpu_of "$pid") p1=$(pg_cpu)
    kill -TERM "$pid"; wait "$pid" || true
    pid=
    python3 - "$work/out.json" "$side" "$round" $((w1 - w0)) $((p1 - p0)) "$tck" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
tasks = d["delivered_per_second"] * 25  # the 5 s warm-up and the 20 s window, both at RATE
workly, postgres, tck = (int(x) for x in sys.argv[4:7])
print(f"{sys.argv[2]:6} r{sys.argv[3]} delivered {d['delivered_per_second']:6.0f}/s "
      f"p50 {d['delivery_p50'] * 1000:6.1f} ms p99 {d['delivery_p99'] * 1000:6.1f} ms | "
      f"Workly {workly / tck / tasks * 1e6:6.1f} µs/task, PostgreSQL {postgres / tck / tasks * 1e6:6.1f} µs/task, "
      f"lost {d['lost']}, duplicated {d['duplicates']}")
PY
  done
done
