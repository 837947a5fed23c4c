#!/usr/bin/env bash
# Two gateway builds side by side on the chat path: both run at once against one fake upstream, and
# at each concurrency the load generator alternates between them in short runs, ROUNDS times. A
# noisy machine's slow spells then hit both builds alike, which sequential runs
# (dev/load/chat-compare.sh) cannot promise. Prints per concurrency the median req/s and p50 of
# each build and B's ratio to A.
# Usage (from the project root): dev/load/chat-pair.sh ROUNDS path/to/agentryd-A path/to/agentryd-B
# CONNS (default "1 2 4 8 16 64") and RUN (default 2s) change the concurrencies and run length;
# BENCH_DIR (default ../shared/bench) holds the fake upstream and the load generator.
set -eu
ROUNDS=${1:?rounds}; A=${2:?agentryd A}; B=${3:?agentryd B}
source "$(pwd)/dev/load/lib.sh"
bench_setup

fp=$(port)
"$T/fake" -addr 127.0.0.1:$fp > /dev/null 2>&1 & PIDS+=($!)
# start_gateway AGD NAME: starts AGD on a workspace of its own; sets GW_PORT.
start_gateway() {
  local gp tp; gp=$(port); tp=$(port)
  bench_workspace "$T/ws-$2" "$gp" "$tp" "$fp" hard
  HOME=$T AGENTRY_WORKSPACE=$T/ws-$2 AGENTRY_CONFIG_PATH=$T/ws-$2/config.yaml "$1" > "$T/$2.log" 2>&1 & PIDS+=($!)
  for _ in $(seq 1 120); do curl -sf -o /dev/null "http://127.0.0.1:$gp/health" && break; sleep 0.5; done
  "$T/loadgen" -url "http://127.0.0.1:$gp/api/v1/chat" -c 8 -d 2s -body "$CHAT_BODY" -auth "$BENCH_AUTH" > /dev/null
  GW_PORT=$gp
}
start_gateway "$A" a; port_a=$GW_PORT
start_gateway "$B" b; port_b=$GW_PORT

for c in ${CONNS:-1 2 4 8 16 64}; do
  : > "$T/a.txt"; : > "$T/b.txt"
  for _ in $(seq 1 "$ROUNDS"); do
    for x in a b; do
      p=$port_a; [ $x = b ] && p=$port_b
      out=$("$T/loadgen" -url "http://127.0.0.1:$p/api/v1/chat" -c "$c" -d "${RUN:-2s}" -body "$CHAT_BODY" -auth "$BENCH_AUTH")
      echo "$(field "$out" rps) $(field "$out" p50)" >> "$T/$x.txt"
    done
  done
  python3 - "$c" "$T/a.txt" "$T/b.txt" <<'PY'
import re, statistics, sys
def ms(v):
    m = re.match(r"([0-9.]+)(µs|us|ms|s)$", v)
    return float(m.group(1)) * {"µs": 1e-3, "us": 1e-3, "ms": 1, "s": 1e3}[m.group(2)]
(ra, pa), (rb, pb) = [
    (statistics.median(float(r[0]) for r in rows), statistics.median(ms(r[1]) for r in rows))
    for rows in ([l.split() for l in open(f) if l.strip()] for f in sys.argv[2:])]
print(f"c={sys.argv[1]:>3}  A {ra:7.1f} req/s p50 {pa:.3f} ms   B {rb:7.1f} req/s p50 {pb:.3f} ms   B/A req/s {rb / ra:.2f} p50 {pb / pa:.2f}")
PY
done
