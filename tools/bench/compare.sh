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
set -euo pipefail
before=$1 after=$2 backend=$3 rate=$4 rounds=$5
here=$(cd "$(dirname "$0")/../.." && pwd)
work=$(mktemp -d)
tck=$(getconf CLK_TCK)
. "$here/tools/bench/servers.sh"
for round in $(seq 1 "$rounds"); do
  for side in before after; do
    dir=$before; [[ $side == after ]] && dir=$after
    port=$((20000 + RANDOM % 20000))
    start_server "$dir" "$backend" "$port" "$work/server.log"
    pid=$server_pid
    w0=$(cpu_of "$pid") p0=$(pg_cpu)
    (cd "$here" && "$here/.venv/bin/python" -m tools.loadtest -url "http://127.0.0.1:$port" -token "$BENCH_TOKEN" -rate "$rate" \
      -duration 20s -quiet -json "$work/out.json" >/dev/null)
    w1=$(cpu_of "$pid") p1=$(pg_cpu)
    kill -TERM "$pid"; wait "$pid" || true
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
rm -rf "$work"
