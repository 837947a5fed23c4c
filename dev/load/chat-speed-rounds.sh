#!/usr/bin/env bash
# The official figure, repeated: ../shared/bench/chat-speed.sh run ROUNDS times for each build,
# alternating between the builds in every round, so that a noisy machine's slow spells hit them alike.
# On the bench machine one binary's ratio moves by about ±0.03 from run to run; a change of a few per
# cent shows only over many rounds. Prints every run's ratio at 64 connections and added p50 at one,
# then per build the mean ratio, the mean gateway req/s and, against the first build, the rounds it
# won.
# Usage (from the project root): dev/load/chat-speed-rounds.sh ROUNDS path/to/agentryd-A [path/to/agentryd-B ...]
# BENCH_DIR (default ../shared/bench) holds chat-speed.sh.
set -eu
ROUNDS=${1:?rounds}; shift
[ $# -ge 1 ] || { echo "usage: $0 ROUNDS AGENTRYD..." >&2; exit 2; }
BENCH=${BENCH_DIR:-$(pwd)/../shared/bench}
OUT=$(mktemp); trap 'rm -f "$OUT"' EXIT
for r in $(seq 1 "$ROUNDS"); do
  for b in "$@"; do
    res=$("$BENCH/chat-speed.sh" "$b" 2>&1) || { echo "$res" >&2; exit 1; }
    ratio=$(echo "$res" | sed -n 's/^gateway\/direct req\/s at 64 connections: \([0-9.]*\).*/\1/p')
    p50=$(echo "$res" | sed -n 's/^added p50 at 1 connection: \([0-9.-]*\) ms.*/\1/p')
    rps=$(echo "$res" | sed -n 's/^gateway64:.* rps=\([0-9.]*\).*/\1/p')
    echo "round $r $(basename "$b"): ratio $ratio, added p50 $p50 ms, gateway $rps req/s"
    echo "$r $b $ratio $p50 $rps" >> "$OUT"
  done
done
python3 - "$OUT" "$@" <<'PY'
import sys
rows = [l.split() for l in open(sys.argv[1])]
builds = sys.argv[2:]
by = {b: {int(r): (float(x), float(p), float(q)) for r, bb, x, p, q in rows if bb == b} for b in builds}
first = by[builds[0]]
for b in builds:
    runs = by[b]
    ratios = [v[0] for v in runs.values()]
    line = "%s: mean ratio %.3f (%d of %d runs >= 0.20), mean gateway req/s %.0f, added p50 %.3f-%.3f ms" % (
        b, sum(ratios) / len(ratios), sum(x >= 0.20 for x in ratios), len(ratios),
        sum(v[2] for v in runs.values()) / len(runs), min(v[1] for v in runs.values()), max(v[1] for v in runs.values()))
    if b != builds[0]:
        wins = sum(runs[r][0] > first[r][0] for r in runs if r in first)
        line += ", won %d of %d rounds against %s" % (wins, len(runs), builds[0])
    print(line)
PY
