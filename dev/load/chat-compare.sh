#!/usr/bin/env bash
# Two or more gateway builds compared on the chat path, rounds alternating between them so that load
# from elsewhere on a noisy machine hits every build alike. Finer than ../shared/bench/chat-speed.sh
# (which stays the one figure we report): per round and build it prints
#   one:      the added p50 at one connection (gateway p50 minus the direct upstream's, measured in the
#             same round) and the gateway's CPU time per request;
#   many:     req/s at 64 connections and the CPU per request of the gateway, the fake upstream and the
#             load generator, with the machine's idle share;
#   syscalls: the gateway's system calls per request at one connection (strace -c; slow, counts only).
# Usage (from the project root): dev/load/chat-compare.sh MODE ROUNDS path/to/agentryd-a path/to/agentryd-b ...
# A build given as path@off (or @soft) runs with that cost enforcement mode instead of hard, to see
# what governance and its ledger cost.
# BENCH_DIR (default ../shared/bench) holds the fake upstream and the load generator.
set -eu
MODE=${1:?one, many or syscalls}; ROUNDS=${2:?rounds}; shift 2
[ $# -ge 1 ] || { echo "usage: $0 one|many|syscalls ROUNDS AGENTRYD..." >&2; exit 2; }
source "$(pwd)/dev/load/lib.sh"
bench_setup
[ "$MODE" != syscalls ] || command -v strace > /dev/null || { echo "syscalls needs strace" >&2; exit 2; }

cpu_ticks() { awk '{print $14+$15}' "/proc/$1/stat"; } # user+system, in 10 ms ticks
machine() { awk '/^cpu /{print $5+$6, $2+$3+$4+$5+$6+$7+$8+$9}' /proc/stat; } # idle, total

# run_build AGD[@GOVERNANCE]: starts a fresh fake upstream and gateway (costs.enforcement_mode
# GOVERNANCE, hard unless given), warms up, measures MODE, stops both.
run_build() {
  local agd=${1%@*} governance=hard fp gp tp w out n
  [ "$agd" = "$1" ] || governance=${1##*@}
  fp=$(port); gp=$(port); tp=$(port); w="$T/ws-$RANDOM"
  "$T/fake" -addr 127.0.0.1:$fp > /dev/null 2>&1 & local fake=$!
  bench_workspace "$w" "$gp" "$tp" "$fp" "$governance"
  HOME=$T AGENTRY_WORKSPACE=$w AGENTRY_CONFIG_PATH=$w/config.yaml "$agd" > "$w.log" 2>&1 & local gw=$!
  PIDS=("$fake" "$gw")
  for _ in $(seq 1 120); do curl -sf -o /dev/null "http://127.0.0.1:$gp/health" && break; sleep 0.5; done
  local gate="http://127.0.0.1:$gp/api/v1/chat"
  "$T/loadgen" -url "$gate" -c 8 -d 2s -body "$CHAT_BODY" -auth "$BENCH_AUTH" > /dev/null
  case $MODE in
  one)
    local direct g0 g1
    direct=$("$T/loadgen" -url "http://127.0.0.1:$fp/v1/chat/completions" -c 1 -d 3s -body "$DIRECT_BODY")
    g0=$(cpu_ticks "$gw")
    out=$("$T/loadgen" -url "$gate" -c 1 -d 5s -body "$CHAT_BODY" -auth "$BENCH_AUTH")
    g1=$(cpu_ticks "$gw"); n=$(field "$out" ok)
    python3 - "$(field "$direct" p50)" "$(field "$out" p50)" "$(( (g1 - g0) * 10 ))" "$n" <<'PY'
import re, sys
def ms(v):
    m = re.match(r"([0-9.]+)(µs|us|ms|s)$", v)
    return float(m.group(1)) * {"µs": 1e-3, "us": 1e-3, "ms": 1, "s": 1e3}[m.group(2)]
d, g, cpu_ms, n = ms(sys.argv[1]), ms(sys.argv[2]), float(sys.argv[3]), int(sys.argv[4])
print(f"direct p50 {d:.3f} ms  gateway p50 {g:.3f} ms  added {g - d:.3f} ms  gateway CPU/req {cpu_ms / n:.3f} ms")
PY
    ;;
  many)
    "$T/loadgen" -url "$gate" -c 64 -d 10s -body "$CHAT_BODY" -auth "$BENCH_AUTH" > "$T/load.txt" & local lg=$!
    sleep 2
    local g0 f0 l0 i0 t0 g1 f1 l1 i1 t1 before after
    g0=$(cpu_ticks "$gw"); f0=$(cpu_ticks "$fake"); l0=$(cpu_ticks "$lg"); read -r i0 t0 < <(machine)
    sleep 6
    g1=$(cpu_ticks "$gw"); f1=$(cpu_ticks "$fake"); l1=$(cpu_ticks "$lg"); read -r i1 t1 < <(machine)
    wait "$lg"; out=$(cat "$T/load.txt"); n=$(field "$out" ok)
    # CPU per request from the 6 s window's ticks and the run's mean rate.
    python3 - "$(field "$out" rps)" "$((g1 - g0))" "$((f1 - f0))" "$((l1 - l0))" "$(( (i1 - i0) * 100 / (t1 - t0) ))" <<'PY'
import sys
rps, g, f, l, idle = float(sys.argv[1]), *map(int, sys.argv[2:5]), sys.argv[5]
per = lambda ticks: ticks * 10 / (rps * 6)
print(f"req/s {rps:7.1f}  CPU/req gateway {per(g):.3f} ms, fake {per(f):.3f}, loadgen {per(l):.3f}  machine idle {idle}%")
PY
    ;;
  syscalls)
    timeout -s INT 4 strace -f -c -p "$gw" -o "$T/strace.txt" 2> /dev/null & local st=$!
    sleep 0.3
    out=$("$T/loadgen" -url "$gate" -c 1 -d 3s -body "$CHAT_BODY" -auth "$BENCH_AUTH")
    wait "$st" || true; n=$(field "$out" ok)
    awk -v n="$n" 'NR > 2 && $4 + 0 > 0 && $NF != "total" {printf "%s %.2f  ", $NF, $4 / n}' "$T/strace.txt" |
      tr -s ' ' '\n' | paste - - | sort -k2 -nr | head -8 | awk '{printf "%s %s  ", $1, $2} END {print "(per request)"}'
    ;;
  *) echo "unknown mode $MODE (one, many, syscalls)" >&2; exit 2 ;;
  esac
  kill "$gw" "$fake" 2> /dev/null || true; wait "$gw" "$fake" 2> /dev/null || true; PIDS=()
}

for round in $(seq 1 "$ROUNDS"); do
  for agd in "$@"; do
    printf 'round %d  %-28s ' "$round" "$(basename "$agd")"
    run_build "$agd"
  done
done
