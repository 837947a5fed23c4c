#!/usr/bin/env bash
# The OpenAI-compatible endpoint's cost over the gateway's own chat route (issue 51), measured the
# way ../shared/bench/chat-speed.sh measures: its fake OpenAI upstream and closed-loop load
# generator, one gateway in hard-mode governance, every request a fresh session. In one run the
# load generator alternates between POST /api/v1/chat and POST /v1/chat/completions (same agent,
# same text) in short runs, ROUNDS times, so slow spells of a noisy machine hit both alike.
# Prints per concurrency the median req/s and p50 of each route and the added p50 of /v1.
# Usage (from the project root): dev/load/openai-compat.sh [ROUNDS] [path/to/agentryd]
# CONNS (default "1 64") and RUN (default 3s) change the concurrencies and run length.
set -eu
ROUNDS=${1:-5}; AGD=${2:-bin/agentryd}
[ -x "$AGD" ] || { echo "no gateway binary at $AGD (make build)"; exit 2; }
source "$(pwd)/dev/load/lib.sh"
bench_setup

fp=$(port); gp=$(port); tp=$(port)
"$T/fake" -addr 127.0.0.1:$fp > /dev/null 2>&1 & PIDS+=($!)
bench_workspace "$T/ws" "$gp" "$tp" "$fp" hard
HOME=$T AGENTRY_WORKSPACE=$T/ws AGENTRY_CONFIG_PATH=$T/ws/config.yaml "$AGD" > "$T/gw.log" 2>&1 & PIDS+=($!)
for _ in $(seq 1 120); do curl -sf -o /dev/null "http://127.0.0.1:$gp/health" && break; sleep 0.5; done
OAI_BODY='{"model":"agent/bench","messages":[{"role":"user","content":"Hello, how are you today?"}],"user":"lg-{n}"}'
CHAT=http://127.0.0.1:$gp/api/v1/chat; OAI=http://127.0.0.1:$gp/v1/chat/completions
"$T/loadgen" -url "$CHAT" -c 8 -d 2s -body "$CHAT_BODY" -auth "$BENCH_AUTH" > /dev/null
"$T/loadgen" -url "$OAI" -c 8 -d 2s -body "$OAI_BODY" -auth "$BENCH_AUTH" > /dev/null

for c in ${CONNS:-1 64}; do
  : > "$T/chat.txt"; : > "$T/oai.txt"
  for _ in $(seq 1 "$ROUNDS"); do
    out=$("$T/loadgen" -url "$CHAT" -c "$c" -d "${RUN:-3s}" -body "$CHAT_BODY" -auth "$BENCH_AUTH")
    echo "$(field "$out" rps) $(field "$out" p50) $(field "$out" non200)" >> "$T/chat.txt"
    out=$("$T/loadgen" -url "$OAI" -c "$c" -d "${RUN:-3s}" -body "$OAI_BODY" -auth "$BENCH_AUTH")
    echo "$(field "$out" rps) $(field "$out" p50) $(field "$out" non200)" >> "$T/oai.txt"
  done
  python3 - "$c" "$T/chat.txt" "$T/oai.txt" <<'PY'
import re, statistics, sys
def ms(v):
    m = re.match(r"([0-9.]+)(µs|us|ms|s)$", v)
    return float(m.group(1)) * {"µs": 1e-3, "us": 1e-3, "ms": 1, "s": 1e3}[m.group(2)]
rows = [[l.split() for l in open(f) if l.strip()] for f in sys.argv[2:]]
bad = sum(int(r[2]) for rs in rows for r in rs)
(ra, pa), (rb, pb) = [(statistics.median(float(r[0]) for r in rs), statistics.median(ms(r[1]) for r in rs)) for rs in rows]
print(f"c={sys.argv[1]:>3}  /api/v1/chat {ra:7.1f} req/s p50 {pa:.3f} ms   /v1/chat/completions {rb:7.1f} req/s p50 {pb:.3f} ms"
      f"   added p50 {pb - pa:+.3f} ms   req/s ratio {rb / ra:.2f}   non-200 {bad}")
PY
done
