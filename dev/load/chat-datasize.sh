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
port() { python3 -c 'import socket;s=socket.socket();s.bind(("127.0.0.1",0));print(s.getsockname()[1])'; }
(cd "$BENCH/fake" && go build -o "$T/fake" . && cd "$BENCH/loadgen" && go build -o "$T/loadgen" .) || { echo "no fake upstream and load generator in $BENCH (set BENCH_DIR)"; exit 2; }
go build -o "$T/chatdata" ./dev/load/chatdata
FP=$(port)
"$T/fake" -addr 127.0.0.1:$FP > /dev/null 2>&1 & PIDS+=($!)
L="$T/loadgen"; A="Bearer bench-key-0123456789"
DI='{"model":"gpt-4o-mini","messages":[{"role":"user","content":"Hello, how are you today?"}]}'
AG='{"agent_id":"bench","text":"Hello, how are you today?","user_id":"lg-{n}"}'
field() { python3 -c 'import re,sys; print(re.search(r"\b%s=(\S+)" % sys.argv[2], sys.argv[1]).group(1))' "$1" "$2"; }
echo "| ledger rows | sessions | db MiB | direct req/s | gateway req/s | gateway non-200 | ratio | gateway RSS MiB |"
echo "|---|---|---|---|---|---|---|---|"
for size in $SIZES; do
  ledger=${size%%:*}; sessions=${size##*:}
  W="$T/ws-$ledger-$sessions"; mkdir -p "$W/agents" "$W/data"
  GP=$(port); TP=$(port); UP=$(port)
  cat > "$W/config.yaml" <<YAML
server: {host: 127.0.0.1, port: $GP, api_key: bench-key-0123456789}
temporal: {embedded: {frontend_port: $TP, ui_port: $UP}}
llm:
  default_provider: fake
  providers:
    fake: {type: openai, base_url: "http://127.0.0.1:$FP/v1", api_key: unused}
costs:
  enforcement_mode: hard
  daily_budget_usd: 1000000
  pricing:
    fake/gpt-4o-mini: {input_per_mtok: 0.15, output_per_mtok: 0.6, source: bench, effective_date: "2026-01-01", version: "1"}
log: {level: warn}
YAML
  printf 'id: bench\ndescription: bench agent\nllm: {provider: fake, model: gpt-4o-mini}\nsystem_prompt: You are terse.\n' > "$W/agents/bench.yaml"
  "$T/chatdata" -db "$W/data/agentry.db" -ledger "$ledger" -sessions "$sessions" >&2
  HOME=$T AGENTRY_WORKSPACE=$W AGENTRY_CONFIG_PATH=$W/config.yaml "$AGD" > "$W/gw.log" 2>&1 & GW=$!; PIDS+=($GW)
  for _ in $(seq 1 240); do curl -sf -o /dev/null "http://127.0.0.1:$GP/health" && break; sleep 0.5; done
  $L -url http://127.0.0.1:$GP/api/v1/chat -c 8 -d 2s -body "$AG" -auth "$A" > /dev/null
  d64=$($L -url http://127.0.0.1:$FP/v1/chat/completions -c 64 -d 10s -body "$DI")
  g64=$($L -url http://127.0.0.1:$GP/api/v1/chat -c 64 -d 10s -body "$AG" -auth "$A")
  rss=$(awk '/VmRSS/ {printf "%d", $2/1024}' /proc/$GW/status)
  mib=$(du -sm "$W/data" | cut -f1)
  dr=$(field "$d64" rps); gr=$(field "$g64" rps); bad=$(( $(field "$g64" errors) + $(field "$g64" non200) ))
  echo "| $ledger | $sessions | $mib | $dr | $gr | $bad | $(python3 -c "print('%.3f' % ($gr/$dr))") | $rss |"
  [ "$bad" = 0 ] || { echo "gateway errors; its log:" >&2; grep -iE 'error|fail' "$W/gw.log" | head -5 >&2; }
  kill $GW 2>/dev/null || true; wait $GW 2>/dev/null || true
done
