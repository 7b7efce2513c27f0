# Sourced by the study scripts: the embedded stack (`gemmwatch up`) started in the background for
# the script's lifetime, and waited for until it serves.
#   source scripts/studies/stack.sh
#   start_stack PORT LOG [WAIT_S]     (GEMMWATCH_DATA_DIR and the rest from the environment)
#   wait_for_worker PORT [WAIT_S]   until a worker is listed (it registers once its GPU process is warm)
# Stops the stack when the script exits. Fails, with the log's tail, where the stack exits or does
# not serve within WAIT_S seconds (default 180), instead of running the study against nothing.

start_stack() {
    local port=$1 log=$2 wait_s=${3:-180}
    python3 -m cli.main up --port "$port" > "$log" 2>&1 &
    STACK_PID=$!
    trap 'kill "$STACK_PID" 2>/dev/null || true' EXIT
    local deadline=$((SECONDS + wait_s))
    until curl -sf "http://127.0.0.1:$port/healthz" > /dev/null; do
        if ! kill -0 "$STACK_PID" 2>/dev/null; then
            echo "gemmwatch up exited before it served on :$port; its log:" >&2; tail -20 "$log" >&2; return 1
        fi
        if ((SECONDS >= deadline)); then
            echo "gemmwatch up did not serve on :$port within ${wait_s} s; its log:" >&2; tail -20 "$log" >&2; return 1
        fi
        sleep 1
    done
}

wait_for_worker() {
    local port=$1 wait_s=${2:-300}
    local deadline=$((SECONDS + wait_s))
    until curl -sf "http://127.0.0.1:$port/api/workers" | grep -q '"name"'; do
        if ((SECONDS >= deadline)); then
            echo "no worker registered on :$port within ${wait_s} s" >&2; return 1
        fi
        sleep 1
    done
}
