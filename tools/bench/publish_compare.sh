#!/usr/bin/env bash
# What a schema and content filters cost publishing (issue 42), against a build without them.
#
#   tools/bench/publish_compare.sh BEFORE_DIR AFTER_DIR sqlite|postgres ROUNDS [SECONDS]
#
# Each directory is a checkout with its own .venv (as compare.sh wants). Per round, for 1, 10 and
# 100 endpoints: BEFORE publishes plain events, AFTER plain ones, then with a JSON Schema on the
# type (--schema), a content filter on every endpoint (--filter), and both; each on a fresh server
# with WORKLY_DISPATCH=false (publishing, not delivery), 32 publishers closed loop for SECONDS
# (default 5), through AFTER's tools/bench/publish_api.py. Prints one line per run; the medians
# per configuration at the end.
set -euo pipefail
before=$1 after=$2 backend=$3 rounds=$4 seconds=${5:-5}
here=$(cd "$(dirname "$0")/../.." && pwd)
work=$(mktemp -d)
. "$here/tools/bench/servers.sh"
export WORKLY_DISPATCH=false
server_pid=
trap 'if [[ -n $server_pid ]]; then kill -TERM "$server_pid" 2>/dev/null || true; fi; rm -rf "$work"' EXIT
port=7391
results=$work/results.txt
for round in $(seq 1 "$rounds"); do
  for endpoints in 1 10 100; do
    for side in before after after:--schema after:--filter "after:--schema --filter"; do
      dir=$before; [[ $side == after* ]] && dir=$after
      flags=${side#after}; flags=${flags#:}; [[ $side == before ]] && flags=
      start_server "$dir" "$backend" "$port" "$work/server.log"
      line=$("$here/.venv/bin/python" -m tools.bench.publish_api "http://127.0.0.1:$port" "$endpoints" \
        "$seconds" 32 "$BENCH_TOKEN" $flags)
      kill -TERM "$server_pid"; wait "$server_pid" 2>/dev/null || true; server_pid=
      name=${side%%:*}
      echo "round $round $name: $line" | tee -a "$results"
    done
  done
done
echo "medians (events/s):"
python3 - "$results" <<'PY'
import re, statistics, sys
runs = {}
for line in open(sys.argv[1]):
    m = re.match(r"round \d+ (\w+): (\d+) endpoints \(([^)]+)\): ([\d,]+) events/s", line)
    if m:
        runs.setdefault((int(m[2]), m[1], m[3]), []).append(int(m[4].replace(",", "")))
for (endpoints, side, variant), found in sorted(runs.items()):
    print(f"{endpoints:>4} endpoints  {side:<6} {variant:<14} {statistics.median(found):>7,.0f}  {found}")
PY
