#!/usr/bin/env bash
# Chat path on PostgreSQL (issue 15): two gateways on one PostgreSQL database, the same fake OpenAI
# upstream and closed-loop load generator as ../shared/bench/chat-speed.sh, every request a fresh
# session. Measures, in one run:
#   - what governance adds at p50 on one connection: a gateway in hard mode against the same
#     gateway with costs.enforcement_mode: off (same database, same binary, restarted);
#   - the added p50 over the direct upstream (hard mode);
#   - req/s at 64 connections: direct, one gateway, and two gateways sharing the database
#     (32 connections each, at the same time).
# PostgreSQL comes from dev/provision.sh (it starts an ephemeral server and names it in
# AGENTRY_TEST_POSTGRES_DSN); the script creates its own database on it and drops it at the end.
# Usage (from the project root):
#   dev/provision.sh dev/load/chat-postgres.sh [path/to/agentryd]
# BENCH_DIR (default ../shared/bench) holds the fake upstream and the load generator.
set -eu
ROOT=$(pwd)
BENCH=${BENCH_DIR:-$ROOT/../shared/bench}
AGD=${1:-bin/agentryd}
[ -x "$AGD" ] || { echo "no gateway binary at $AGD (make build)"; exit 2; }
DSN=${AGENTRY_TEST_POSTGRES_DSN:?run me through dev/provision.sh, or name a server in AGENTRY_TEST_POSTGRES_DSN}
DB=chatbench_$$
T=$(mktemp -d); PIDS=()
cleanup() {
  for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
  psql "$DSN" -qc "DROP DATABASE IF EXISTS $DB" >/dev/null 2>&1 || true
  rm -rf "$T"
}
trap cleanup EXIT
. "$ROOT/dev/load/lib.sh"
build_bench
psql "$DSN" -qc "CREATE DATABASE $DB" >/dev/null
GDSN=$(echo "$DSN" | sed -E "s/dbname=[^ ]+/dbname=$DB/")
FP=$(port)
"$T/fake" -addr 127.0.0.1:$FP > /dev/null 2>&1 & PIDS+=($!)
L="$T/loadgen"

# gateway NAME MODE: starts a gateway with its own workspace (and embedded Temporal) on the shared
# database; prints its process id and port.
gateway() {
  local name=$1 mode=$2 W="$T/$1" GP TP
  GP=$(port); TP=$(port)
  bench_workspace "$W" "$GP" "$TP" "$FP" "$mode" "storage: {backend: postgres, dsn: \"$GDSN\"}"
  HOME=$T AGENTRY_WORKSPACE=$W AGENTRY_CONFIG_PATH=$W/config.yaml "$AGD" > "$W/gw.log" 2>&1 &
  echo "$! $GP"
}
up() { for _ in $(seq 1 240); do curl -sf -o /dev/null "http://127.0.0.1:$1/health" && return; sleep 0.5; done; echo "gateway on $1 did not start" >&2; exit 1; }
chat() { $L -url "http://127.0.0.1:$1/api/v1/chat" -c "$2" -d "$3" -body "$CHAT_BODY" -auth "$BENCH_AUTH"; }

# Governance off, then hard, one gateway at a time (the same database).
read -r OFF OFFP <<<"$(gateway off off)"; PIDS+=($OFF); up "$OFFP"
chat "$OFFP" 8 2s > /dev/null
off1=$(chat "$OFFP" 1 5s)
kill "$OFF"; while kill -0 "$OFF" 2>/dev/null; do sleep 0.2; done
read -r GA GAP <<<"$(gateway a hard)"; PIDS+=($GA); up "$GAP"
read -r GB GBP <<<"$(gateway b hard)"; PIDS+=($GB); up "$GBP"
chat "$GAP" 8 2s > /dev/null; chat "$GBP" 8 2s > /dev/null
d1=$($L -url http://127.0.0.1:$FP/v1/chat/completions -c 1 -d 5s -body "$DIRECT_BODY")
g1=$(chat "$GAP" 1 5s)
d64=$($L -url http://127.0.0.1:$FP/v1/chat/completions -c 64 -d 10s -body "$DIRECT_BODY")
g64=$(chat "$GAP" 64 10s)
chat "$GAP" 32 10s > "$T/two-a" & ca=$!
chat "$GBP" 32 10s > "$T/two-b" & cb=$!
wait $ca $cb
ta=$(cat "$T/two-a"); tb=$(cat "$T/two-b")
printf 'gov off  1: %s\ngateway  1: %s\ndirect   1: %s\ndirect  64: %s\ngateway 64: %s\ntwo (a) 32: %s\ntwo (b) 32: %s\n' "$off1" "$g1" "$d1" "$d64" "$g64" "$ta" "$tb"
python3 - "$off1" "$g1" "$d1" "$d64" "$g64" "$ta" "$tb" <<'PY'
import re, sys
def f(s, k): return re.search(r"\b%s=(\S+)" % k, s).group(1)
def us(v):
    m = re.match(r"([0-9.]+)(µs|us|ms|s)$", v); return float(m.group(1)) * {"µs": 1, "us": 1, "ms": 1e3, "s": 1e6}[m.group(2)]
off1, g1, d1, d64, g64, ta, tb = sys.argv[1:]
bad = sum(int(f(s, "errors")) + int(f(s, "non200")) for s in (off1, g1, g64, ta, tb))
print("governance adds at p50 (hard vs off, 1 connection): %.3f ms (goal <= 0.5)" % ((us(f(g1, "p50")) - us(f(off1, "p50"))) / 1000))
print("added p50 over direct at 1 connection: %.3f ms" % ((us(f(g1, "p50")) - us(f(d1, "p50"))) / 1000))
print("req/s at 64: direct %s, one gateway %s (%.3f of direct), two gateways %.0f (%.3f of direct)" % (
    f(d64, "rps"), f(g64, "rps"), float(f(g64, "rps")) / float(f(d64, "rps")),
    float(f(ta, "rps")) + float(f(tb, "rps")), (float(f(ta, "rps")) + float(f(tb, "rps"))) / float(f(d64, "rps"))))
print("gateway errors and non-200 answers: %d" % bad)
PY
