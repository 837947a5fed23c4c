#!/usr/bin/env bash
# Resident memory of gateway builds, idle and under chat load (issue 43): for each round and each
# build in turn (so a noisy machine's slow spells hit them alike), a fresh workspace, the bench's
# fake upstream and load generator, 8 connections for 2 s to warm up, 10 s of rest, then the idle
# VmRSS; then 64 connections for 20 s with VmRSS sampled every half second (the highest is the
# "loaded" figure) and the req/s against the upstream's direct req/s at 64 connections.
# Usage (from the project root): dev/load/chat-rss.sh ROUNDS path/to/agentryd-A [path/to/agentryd-B ...]
# EXTRA_YAML is appended to every build's config.yaml (e.g. "server: {gc_percent: 400}").
set -eu
ROUNDS=${1:?rounds}; shift
source "$(pwd)/dev/load/lib.sh"
bench_setup
fp=$(port)
"$T/fake" -addr 127.0.0.1:$fp > /dev/null 2>&1 & PIDS+=($!)
sleep 0.5
rss() { awk '/^VmRSS:/ {printf "%d", $2/1024}' "/proc/$1/status"; }
for r in $(seq 1 "$ROUNDS"); do
  d64=$("$T/loadgen" -url "http://127.0.0.1:$fp/v1/chat/completions" -c 64 -d 10s -body "$DIRECT_BODY")
  for b in "$@"; do
    gp=$(port); tp=$(port); W="$T/ws-$r-$(basename "$b")"
    bench_workspace "$W" "$gp" "$tp" "$fp" hard "${EXTRA_YAML:-}"
    HOME=$T AGENTRY_WORKSPACE=$W AGENTRY_CONFIG_PATH=$W/config.yaml "$b" > "$W.log" 2>&1 & pid=$!; PIDS+=($pid)
    for _ in $(seq 1 120); do curl -sf -o /dev/null "http://127.0.0.1:$gp/health" && break; sleep 0.5; done
    "$T/loadgen" -url "http://127.0.0.1:$gp/api/v1/chat" -c 8 -d 2s -body "$CHAT_BODY" -auth "$BENCH_AUTH" > /dev/null
    sleep 10; idle=$(rss $pid)
    "$T/loadgen" -url "http://127.0.0.1:$gp/api/v1/chat" -c 64 -d 20s -body "$CHAT_BODY" -auth "$BENCH_AUTH" > "$T/out" &
    lg=$!; peak=0
    while kill -0 $lg 2>/dev/null; do v=$(rss $pid); [ "$v" -gt "$peak" ] && peak=$v; sleep 0.5; done
    g64=$(cat "$T/out")
    ratio=$(python3 -c "print('%.3f' % ($(field "$g64" rps) / $(field "$d64" rps)))")
    echo "round $r $(basename "$b"): idle RSS ${idle} MB, loaded RSS ${peak} MB, gateway $(field "$g64" rps) req/s, ratio $ratio"
    kill $pid; wait $pid 2>/dev/null || true
  done
done
