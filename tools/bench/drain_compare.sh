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
cpu_of() { awk '{print $14 + $15}' "/proc/$1/stat" 2>/dev/null || echo 0; }
pg_cpu() { local t=0 p; for p in $(pgrep -u postgres postgres || true); do t=$((t + $(cpu_of "$p"))); done; echo "$t"; }
work=$(mktemp -d)
for round in $(seq 1 $rounds); do
 for side in before after; do
  dir=$before; [[ $side == after ]] && dir=$after
  port=$((20000 + RANDOM % 20000))
  if [[ $backend == sqlite ]]; then
    rm -f $work/w.db*
    "$dir/.venv/bin/workly" dev --port $port --db $work/w.db > $work/log 2>&1 &
  else
    psql -q -h 127.0.0.1 -U postgres -c "DROP DATABASE IF EXISTS workly_compare" -c "CREATE DATABASE workly_compare" >/dev/null
    WORKLY_DATABASE_URL=postgresql://postgres@127.0.0.1/workly_compare WORKLY_SIGNING_SECRET=$("$dir/.venv/bin/workly" secret) \
      WORKLY_API_TOKENS=compare WORKLY_OUTBOUND_ALLOW=127.0.0.1 "$dir/.venv/bin/workly" serve --host 127.0.0.1 --port $port > $work/log 2>&1 &
  fi
  pid=$!
  for _ in $(seq 1 100); do curl -sf http://127.0.0.1:$port/health/ready >/dev/null && break; sleep 0.1; done
  w0=$(cpu_of $pid); p0=$(pg_cpu)
  (cd "$here" && "$here/.venv/bin/python" -m tools.bench.drain http://127.0.0.1:$port -token compare -tasks 20000 -hop 3 -json $work/d.json > $work/out.txt 2>&1)
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
