# Sourced by compare.sh and drain_compare.sh: a Workly server per round, and CPU time from /proc.
#
#   start_server DIR BACKEND PORT LOG   start DIR's workly (SQLite in $work/w.db, fresh; or
#                                       PostgreSQL database workly_compare, recreated), set
#                                       $server_pid, and wait until it answers /health/ready
#   cpu_of PID                          user + system clock ticks of one process
#   pg_cpu                              … summed over all PostgreSQL processes
# The caller sets $work (a temporary directory).

# The API token of both servers and their clients (serve takes tokens of 32 characters or more).
BENCH_TOKEN=compare-token-0123456789abcdef-0123

cpu_of() { awk '{print $14 + $15}' "/proc/$1/stat" 2>/dev/null || echo 0; }
pg_cpu() { local t=0 p; for p in $(pgrep -u postgres postgres || true); do t=$((t + $(cpu_of "$p"))); done; echo "$t"; }

start_server() {
  local dir=$1 backend=$2 port=$3 log=$4
  if [[ $backend == sqlite ]]; then
    rm -f "$work"/w.db*
    "$dir/.venv/bin/workly" dev --port "$port" --db "$work/w.db" >"$log" 2>&1 &
  else
    psql -q -h 127.0.0.1 -U postgres -c "DROP DATABASE IF EXISTS workly_compare" \
      -c "CREATE DATABASE workly_compare" >/dev/null
    WORKLY_DATABASE_URL=postgresql://postgres@127.0.0.1/workly_compare \
      WORKLY_SIGNING_SECRET=$("$dir/.venv/bin/workly" secret) \
      WORKLY_API_TOKENS=$BENCH_TOKEN WORKLY_OUTBOUND_ALLOW=127.0.0.1 \
      "$dir/.venv/bin/workly" serve --host 127.0.0.1 --port "$port" >"$log" 2>&1 &
  fi
  server_pid=$!
  for _ in $(seq 1 100); do curl -sf "http://127.0.0.1:$port/health/ready" >/dev/null && break; sleep 0.1; done
}
