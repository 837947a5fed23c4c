# Shared by the chat load scripts in dev/load (sourced, not run). They all measure the way
# ../shared/bench/chat-speed.sh does: its fake OpenAI upstream, its closed-loop load generator, a
# gateway in hard-mode governance with a bench agent, every request a fresh session.
# The sourcing script calls bench_setup first.

# port prints a free loopback port.
port() { python3 -c 'import socket;s=socket.socket();s.bind(("127.0.0.1",0));print(s.getsockname()[1])'; }

# field OUTPUT KEY prints KEY's value from a load generator line (rps, p50, errors, non200 ...).
field() { python3 -c 'import re,sys; print(re.search(r"\b%s=(\S+)" % sys.argv[2], sys.argv[1]).group(1))' "$1" "$2"; }

# bench_setup: BENCH (BENCH_DIR, default ../shared/bench from the project root, the current
# directory), a temporary directory T removed on exit with the processes in PIDS, and the bench's
# binaries built into T.
bench_setup() {
  BENCH=${BENCH_DIR:-$(pwd)/../shared/bench}
  T=$(mktemp -d); PIDS=()
  trap 'for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done; rm -rf "$T"' EXIT
  build_bench
}

# build_bench builds the fake upstream and the load generator into $T.
build_bench() {
  (cd "$BENCH/fake" && go build -o "$T/fake" . && cd "$BENCH/loadgen" && go build -o "$T/loadgen" .) ||
    { echo "no fake upstream and load generator in $BENCH (set BENCH_DIR)" >&2; exit 2; }
}

# bench_workspace DIR GATEWAY_PORT TEMPORAL_PORT FAKE_PORT [MODE [EXTRA_YAML]] writes a workspace:
# config.yaml (hard mode unless MODE says otherwise, a budget no run reaches, the fake's prices)
# plus EXTRA_YAML, and the bench agent.
bench_workspace() {
  local W=$1 mode=${5:-hard}
  mkdir -p "$W/agents" "$W/data"
  cat > "$W/config.yaml" <<YAML
server: {host: 127.0.0.1, port: $2, api_key: bench-key-0123456789}
temporal: {embedded: {frontend_port: $3, ui_enabled: false}}
llm:
  default_provider: fake
  providers:
    fake: {type: openai, base_url: "http://127.0.0.1:$4/v1", api_key: unused}
costs:
  enforcement_mode: $mode
  daily_budget_usd: 1000000
  pricing:
    fake/gpt-4o-mini: {input_per_mtok: 0.15, output_per_mtok: 0.6, source: bench, effective_date: "2026-01-01", version: "1"}
log: {level: warn}
${6:-}
YAML
  printf 'id: bench\ndescription: bench agent\nllm: {provider: fake, model: gpt-4o-mini}\nsystem_prompt: You are terse.\n' > "$W/agents/bench.yaml"
}

# The request bodies: direct to the upstream, and through the gateway's chat route.
DIRECT_BODY='{"model":"gpt-4o-mini","messages":[{"role":"user","content":"Hello, how are you today?"}]}'
CHAT_BODY='{"agent_id":"bench","text":"Hello, how are you today?","user_id":"lg-{n}"}'
BENCH_AUTH="Bearer bench-key-0123456789"
