#!/usr/bin/env bash
# Chat path on PostgreSQL (issue 15): two gateways on one PostgreSQL database, the same fake OpenAI
# upstream and closed-loop load generator as ../shared/bench/chat-speed.sh, every request a fresh
# session. Measures, in one run:
#   - what governance adds at p50 on one connection: a gateway in hard mode against one with
#     costs.enforcement_mode: off (same database, same binary, running at the same time, measured
#     in alternation, three rounds);
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

# Governance off and hard: three gateways on the same database at once (off, a and b in hard
# mode), the one-connection figures taken in alternation, three rounds, so that both see the
# same machine; the median round counts.
read -r OFF OFFP <<<"$(gateway off off)"; PIDS+=($OFF)
read -r GA GAP <<<"$(gateway a hard)"; PIDS+=($GA)
read -r GB GBP <<<"$(gateway b hard)"; PIDS+=($GB)
up "$OFFP"; up "$GAP"; up "$GBP"
chat "$OFFP" 8 2s > /dev/null; chat "$GAP" 8 2s > /dev/null; chat "$GBP" 8 2s > /dev/null
off1=(); g1=()
for _ in 1 2 3; do
  off1+=("$(chat "$OFFP" 1 3s)")
  g1+=("$(chat "$GAP" 1 3s)")
done
kill "$OFF"
d1=$($L -url http://127.0.0.1:$FP/v1/chat/completions -c 1 -d 5s -body "$DIRECT_BODY")
d64=$($L -url http://127.0.0.1:$FP/v1/chat/completions -c 64 -d 10s -body "$DIRECT_BODY")
g64=$(chat "$GAP" 64 10s)
chat "$GAP" 32 10s > "$T/two-a" & ca=$!
chat "$GBP" 32 10s > "$T/two-b" & cb=$!
wait $ca $cb
ta=$(cat "$T/two-a"); tb=$(cat "$T/two-b")
for i in 0 1 2; do printf 'gov off  1 (round %d): %s\ngateway  1 (round %d): %s\n' $((i+1)) "${off1[$i]}" $((i+1)) "${g1[$i]}"; done
printf 'direct   1: %s\ndirect  64: %s\ngateway 64: %s\ntwo (a) 32: %s\ntwo (b) 32: %s\n' "$d1" "$d64" "$g64" "$ta" "$tb"
python3 - "$d1" "$d64" "$g64" "$ta" "$tb" "${off1[@]}" "${g1[@]}" <<'PY'
import re, statistics, sys
def f(s, k): return re.search(r"\b%s=(\S+)" % k, s).group(1)
def us(v):
    m = re.match(r"([0-9.]+)(µs|us|ms|s)$", v); return float(m.group(1)) * {"µs": 1, "us": 1, "ms": 1e3, "s": 1e6}[m.group(2)]
d1, d64, g64, ta, tb = sys.argv[1:6]
off1, g1 = sys.argv[6:9], sys.argv[9:12]
bad = sum(int(f(s, "errors")) + int(f(s, "non200")) for s in off1 + g1 + [g64, ta, tb])
adds = [(us(f(g, "p50")) - us(f(o, "p50"))) / 1000 for o, g in zip(off1, g1)]
print("governance adds at p50 (hard vs off, 1 connection, rounds %s): median %.3f ms (goal <= 0.5)" % (
    ", ".join("%.3f" % a for a in adds), statistics.median(adds)))
g1p50 = statistics.median(us(f(g, "p50")) for g in g1)
print("added p50 over direct at 1 connection: %.3f ms" % ((g1p50 - us(f(d1, "p50"))) / 1000))
print("req/s at 64: direct %s, one gateway %s (%.3f of direct), two gateways %.0f (%.3f of direct)" % (
    f(d64, "rps"), f(g64, "rps"), float(f(g64, "rps")) / float(f(d64, "rps")),
    float(f(ta, "rps")) + float(f(tb, "rps")), (float(f(ta, "rps")) + float(f(tb, "rps"))) / float(f(d64, "rps"))))
print("gateway errors and non-200 answers: %d" % bad)
PY
