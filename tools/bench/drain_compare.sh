#!/usr/bin/env bash
# Drain a 20,000-task backlog on two checkouts, alternating, with the server's CPU per task.
#
#   tools/bench/drain_compare.sh BEFORE_DIR AFTER_DIR sqlite|postgres ROUNDS
#
# As compare.sh (each directory a checkout with its own .venv from pip install .), but each round runs
# tools/bench/drain.py (batch enqueue into a paused queue, then the drain) and reads the CPU time of the
# Workly process and of all PostgreSQL processes from /proc around it, per task (enqueue and drain).
set -u
here=$(cd "$(dirname "$0")/../.." && pwd)
before=$1 after=$2 backend=$3 rounds=$4
tck=$(getconf CLK_TCK)
work=$(mktemp -d)
. "$here/tools/bench/servers.sh"
for round in $(seq 1 $rounds); do
 for side in before after; do
  dir=$before; [[ $side == after ]] && dir=$after
  port=$((20000 + RANDOM % 20000))
  start_server "$dir" "$backend" "$port" "$work/log"
  pid=$server_pid
  w0=$(cpu_of $pid); p0=$(pg_cpu)
  (cd "$here" && "$here/.venv/bin/python" -m tools.bench.drain http://127.0.0.1:$port -token "$BENCH_TOKEN" -tasks 20000 -hop 3 -json $work/d.json > $work/out.txt 2>&1)
  w1=$(cpu_of $pid); p1=$(pg_cpu)
  kill -TERM $pid; wait $pid
  python3 - $work/d.json $side $round $((w1-w0)) $((p1-p0)) $tck <<'PY'
import json,sys
d=json.load(open(sys.argv[1])); w,p,t=(int(x) for x in sys.argv[4:7])
keys={k:v for k,v in d.items() if not isinstance(v,(list,dict))}
print(sys.argv[2], "r"+sys.argv[3], {k:(round(v) if isinstance(v,float) else v) for k,v in keys.items()}, f"Workly {w/t/20000*1e6:.0f} us/task PG {p/t/20000*1e6:.0f} us/task")
PY
 done
done
rm -rf $work
