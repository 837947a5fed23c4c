#!/usr/bin/env bash
# Chat soak (issue 15): the gateway under chat-speed.sh's load (64 connections, hard-mode
# governance, the fake OpenAI upstream) for MINUTES minutes without a pause, printing each minute's
# req/s, failed answers and the gateway's RSS, so memory growth under sustained load shows. Ends
# with the RSS of the first and the last minute and their ratio.
# As in chat-speed.sh, each minute's load generator numbers its user ids from 1, so from minute 2
# on most requests continue a session of an earlier minute (its history read, longer prompts);
# SOAK_FRESH=1 gives each minute ids of its own, so every request starts a session.
# Usage (from the project root): dev/load/chat-soak.sh [path/to/agentryd] [MINUTES (default 10)]
# BENCH_DIR (default ../shared/bench) holds the fake upstream and the load generator.
# SOAK_PROFILES=DIR also serves the profiler and saves, after each minute, the gateway's heap
# profile (DIR/heap-N.pprof) and Go's memory statistics (DIR/memstats-N.txt), to tell Go heap
# growth from memory outside it (SQLite's allocator): compare them with `go tool pprof -base`.
set -eu
ROOT=$(pwd)
BENCH=${BENCH_DIR:-$ROOT/../shared/bench}
AGD=${1:-bin/agentryd}
MINUTES=${2:-10}
[ -x "$AGD" ] || { echo "no gateway binary at $AGD (make build)"; exit 2; }
T=$(mktemp -d); PIDS=()
trap 'for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done; rm -rf "$T"' EXIT
. "$ROOT/dev/load/lib.sh"
build_bench
FP=$(port); GP=$(port); TP=$(port); MP=$(port)
"$T/fake" -addr 127.0.0.1:$FP > /dev/null 2>&1 & PIDS+=($!)
PROF=${SOAK_PROFILES:-}
if [ -n "$PROF" ]; then
  mkdir -p "$PROF"
  bench_workspace "$T/ws" "$GP" "$TP" "$FP" hard "telemetry: {metrics: {enabled: true, listen: \"127.0.0.1:$MP\", pprof: true}}"
else
  bench_workspace "$T/ws" "$GP" "$TP" "$FP"
fi
HOME=$T AGENTRY_WORKSPACE=$T/ws AGENTRY_CONFIG_PATH=$T/ws/config.yaml "$AGD" > "$T/gw.log" 2>&1 & GW=$!; PIDS+=($GW)
for _ in $(seq 1 240); do curl -sf -o /dev/null "http://127.0.0.1:$GP/health" && break; sleep 0.5; done
rss() { awk '/VmRSS/ {printf "%d", $2/1024}' /proc/$GW/status; }
echo "gateway RSS at rest: $(rss) MiB"
echo "| minute | req/s | errors + non-200 | p50 | p99 | RSS MiB | db MiB |"
echo "|---|---|---|---|---|---|---|"
first=""; last=""
for m in $(seq 1 "$MINUTES"); do
  body=$CHAT_BODY
  [ -z "${SOAK_FRESH:-}" ] || body=${CHAT_BODY/lg-/m$m-}
  out=$("$T/loadgen" -url "http://127.0.0.1:$GP/api/v1/chat" -c 64 -d 60s -body "$body" -auth "$BENCH_AUTH")
  r=$(rss); first=${first:-$r}; last=$r
  if [ -n "$PROF" ]; then
    curl -s -o "$PROF/heap-$m.pprof" "http://127.0.0.1:$MP/debug/pprof/heap"
    curl -s "http://127.0.0.1:$MP/debug/pprof/heap?debug=1" | sed -n '/^# runtime.MemStats/,$p' > "$PROF/memstats-$m.txt"
  fi
  echo "| $m | $(field "$out" rps) | $(( $(field "$out" errors) + $(field "$out" non200) )) | $(field "$out" p50) | $(field "$out" p99) | $r | $(du -sm "$T/ws/data" | cut -f1) |"
done
python3 -c "import sys; a,b=int(sys.argv[1]),int(sys.argv[2]); print('RSS after minute 1: %d MiB, after minute %s: %d MiB (x%.2f)' % (a, sys.argv[3], b, b/a))" "$first" "$last" "$MINUTES"
