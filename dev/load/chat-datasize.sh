#!/usr/bin/env bash
# Chat throughput vs data size (issue 15): for each size, a fresh workspace whose SQLite database is
# seeded with that many ledger rows and sessions (dev/load/chatdata), then the same fake OpenAI
# upstream and closed-loop load generator as ../shared/bench/chat-speed.sh, direct and through the
# gateway (hard-mode governance), 64 connections, one run per size.
# Usage (from the project root):
#   dev/load/chat-datasize.sh [path/to/agentryd] [ledger:sessions ...]   (default sizes: 0:0 100000:20000)
# BENCH_DIR (default ../shared/bench) holds the fake upstream and the load generator.
set -eu
ROOT=$(pwd)
BENCH=${BENCH_DIR:-$ROOT/../shared/bench}
AGD=${1:-bin/agentryd}; shift || true
SIZES=${*:-0:0 100000:20000}
[ -x "$AGD" ] || { echo "no gateway binary at $AGD (make build)"; exit 2; }
T=$(mktemp -d); PIDS=()
cleanup() { for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done; rm -rf "$T"; }
trap cleanup EXIT
. "$ROOT/dev/load/lib.sh"
build_bench
go build -o "$T/chatdata" ./dev/load/chatdata
FP=$(port)
"$T/fake" -addr 127.0.0.1:$FP > /dev/null 2>&1 & PIDS+=($!)
L="$T/loadgen"
echo "| ledger rows | sessions | db MiB | direct req/s | gateway req/s | gateway non-200 | ratio | gateway RSS MiB |"
echo "|---|---|---|---|---|---|---|---|"
run=0
for size in $SIZES; do
  ledger=${size%%:*}; sessions=${size##*:}; run=$((run + 1))
  # A workspace per run: a size given twice is measured twice from scratch.
  W="$T/ws-$run-$ledger-$sessions"; mkdir -p "$W/agents" "$W/data"
  GP=$(port); TP=$(port)
  bench_workspace "$W" "$GP" "$TP" "$FP"
  "$T/chatdata" -db "$W/data/agentry.db" -ledger "$ledger" -sessions "$sessions" >&2
  HOME=$T AGENTRY_WORKSPACE=$W AGENTRY_CONFIG_PATH=$W/config.yaml "$AGD" > "$W/gw.log" 2>&1 & GW=$!; PIDS+=($GW)
  for _ in $(seq 1 240); do curl -sf -o /dev/null "http://127.0.0.1:$GP/health" && break; sleep 0.5; done
  $L -url http://127.0.0.1:$GP/api/v1/chat -c 8 -d 2s -body "$CHAT_BODY" -auth "$BENCH_AUTH" > /dev/null
  d64=$($L -url http://127.0.0.1:$FP/v1/chat/completions -c 64 -d 10s -body "$DIRECT_BODY")
  g64=$($L -url http://127.0.0.1:$GP/api/v1/chat -c 64 -d 10s -body "$CHAT_BODY" -auth "$BENCH_AUTH")
  rss=$(awk '/VmRSS/ {printf "%d", $2/1024}' /proc/$GW/status)
  mib=$(du -sm "$W/data" | cut -f1)
  dr=$(field "$d64" rps); gr=$(field "$g64" rps); bad=$(( $(field "$g64" errors) + $(field "$g64" non200) ))
  echo "| $ledger | $sessions | $mib | $dr | $gr | $bad | $(python3 -c "print('%.3f' % ($gr/$dr))") | $rss |"
  [ "$bad" = 0 ] || { echo "gateway errors; its log:" >&2; grep -iE 'error|fail' "$W/gw.log" | head -5 >&2; }
  kill $GW 2>/dev/null || true; wait $GW 2>/dev/null || true
done
