#!/usr/bin/env bash
# Cost of tracing on the chat path (issue 16), measured from outside with ../shared/bench/chat-speed.sh:
# each round runs it twice on the same binary, first as configured there (telemetry.exporter none: spans
# are no-ops; Prometheus metrics are always on), then with every trace recorded and exported over
# OTLP/HTTP (exporter otlp, sample_ratio 1) to a sink on loopback that discards (dev/load/otlpsink).
# Rounds alternate so that load from elsewhere hits both; the medians of the per-round ratios are printed.
# Usage (from the project root): dev/load/chat-tracing.sh [path/to/agentryd] [rounds, default 3]
# BENCH_DIR (default ../shared/bench) holds chat-speed.sh.
set -eu
ROOT=$(pwd)
BENCH=${BENCH_DIR:-$ROOT/../shared/bench}
AGD=$(cd "$(dirname "${1:-bin/agentryd}")" && pwd)/$(basename "${1:-bin/agentryd}")
ROUNDS=${2:-3}
[ -x "$AGD" ] || { echo "no gateway binary at $AGD (make build)"; exit 2; }
T=$(mktemp -d); SINK=""
cleanup() { [ -n "$SINK" ] && kill "$SINK" 2>/dev/null; rm -rf "$T"; }
trap cleanup EXIT
port() { python3 -c 'import socket;s=socket.socket();s.bind(("127.0.0.1",0));print(s.getsockname()[1])'; }
go build -o "$T/otlpsink" ./dev/load/otlpsink
SP=$(port)
"$T/otlpsink" -addr 127.0.0.1:$SP > "$T/sink.out" 2>&1 & SINK=$!
# chat-speed.sh starts the binary it is given with a fixed environment: a wrapper adds the tracing keys.
cat > "$T/agentryd-traced" <<SH
#!/bin/sh
AGENTRY_TELEMETRY_EXPORTER=otlp AGENTRY_TELEMETRY_ENDPOINT=http://127.0.0.1:$SP AGENTRY_TELEMETRY_SAMPLE_RATIO=1 exec "$AGD" "\$@"
SH
chmod +x "$T/agentryd-traced"
field() { python3 -c 'import re,sys; print(re.search(r"^%s:.*\brps=(\S+).*\bp50=(\S+)" % re.escape(sys.argv[2]), sys.argv[1], re.M).group(int(sys.argv[3])))' "$1" "$2" "$3"; }
echo "| round | req/s at 64, off | req/s at 64, on | ratio on/off | p50 at 1, off | p50 at 1, on |"
echo "|---|---|---|---|---|---|"
ratios=()
for r in $(seq 1 "$ROUNDS"); do
  off=$("$BENCH/chat-speed.sh" "$AGD")
  on=$("$BENCH/chat-speed.sh" "$T/agentryd-traced")
  a=$(field "$off" "gateway64" 1); b=$(field "$on" "gateway64" 1)
  ratio=$(python3 -c "print('%.3f' % ($b / $a))")
  ratios+=("$ratio")
  echo "| $r | $a | $b | $ratio | $(field "$off" "gateway 1" 2) | $(field "$on" "gateway 1" 2) |"
done
python3 -c "import statistics,sys; print('median throughput ratio traced/untraced at 64 connections: %.3f (goal >= 0.95)' % statistics.median(map(float, sys.argv[1:])))" "${ratios[@]}"
kill "$SINK"; wait "$SINK" 2>/dev/null || true; SINK=""
echo "sink received: $(cat "$T/sink.out")"
