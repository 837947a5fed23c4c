# The two commands of the README:
#   make run   - the gateway on the embedded defaults (Temporal + SQLite, 127.0.0.1:18789)
#   make test  - the whole test suite (what .ci/run calls)
GO       ?= go
VERSION  ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
LDFLAGS  := -X main.version=$(VERSION)
# Packages whose tests use goroutines run with the race detector; the
# embedded Temporal server's own package is slow under -race and is not ours
# to race-check, so it runs without.
NORACE   := ./internal/temporalserver/...
# e2e tests that skip themselves under -race (too slow there, nothing
# concurrent to check) and run in test-go's race-free step instead.
NORACE_E2E := ^(TestLongRunKeepsHistorySmall|TestKnowledgeRetrievalCorpus)$$

.PHONY: run test test-go fuzz probe build build-slim vet generate workflowcheck replay-record fmt bench load clean

run:
	$(GO) run -ldflags "$(LDFLAGS)" ./cmd/agentryd

build:
	$(GO) build -ldflags "$(LDFLAGS)" -o bin/agentryd ./cmd/agentryd
	$(GO) build -ldflags "$(LDFLAGS)" -o bin/agentry ./cmd/agentry

# A gateway binary without the embedded Temporal server, for deployments
# that use an external cluster (temporal.address).
build-slim:
	$(GO) build -tags noembeddedtemporal -ldflags "$(LDFLAGS)" -o bin/agentryd-slim ./cmd/agentryd

vet:
	$(GO) vet ./...

# Regenerate what is generated from docs/openapi.yaml (the CLI's REST client,
# internal/apiclient/openapi); its test fails while the committed code is stale.
generate:
	$(GO) generate ./internal/apiclient/...

# dev/provision.sh provides PostgreSQL, Redis, tmux and chromium (Debian's
# packages when missing and root; otherwise their tests are skipped, loudly)
# and stops what it started; .ci/run is this same command in strict mode.
test: vet workflowcheck
	bash dev/provision.sh $(MAKE) --no-print-directory test-go

# The suite itself, on whatever services the environment names. -parallel 4:
# the parallel e2e tests are crash tests that mostly wait on gateway
# subprocesses, so four at once on two cores finish sooner (e2e 731 -> 563 s). The fuzz
# targets' seed corpora run here as ordinary tests, then each target fuzzes
# for FUZZ_BRIEF (FUZZ_BRIEF= skips that step); `make fuzz` hunts longer.
FUZZ_BRIEF ?= 2s
test-go:
	$(GO) test -race -count=1 -timeout 20m -parallel 4 $$($(GO) list ./... | grep -v /internal/temporalserver)
	$(GO) test -count=1 -timeout 10m $(NORACE)
	$(GO) test -count=1 -timeout 10m -run '$(NORACE_E2E)' ./e2e/
	$(if $(FUZZ_BRIEF),@$(MAKE) --no-print-directory fuzz FUZZTIME=$(FUZZ_BRIEF))

# Fuzz targets (package:target). `make fuzz` runs each for FUZZTIME (a
# longer hunt: make fuzz FUZZTIME=10m). Findings land in the package's
# testdata/fuzz/<target>/ and then run as ordinary tests.
FUZZ_TARGETS := ./api:FuzzRequestBody ./internal/jsonpath:FuzzParse ./internal/webhook:FuzzMap \
	./internal/config:FuzzParse ./internal/config:FuzzApplyEnv ./internal/agentdef:FuzzParse \
	./internal/llm:FuzzProviderStreams ./internal/agentpkg:FuzzVerify
FUZZTIME ?= 1m
fuzz:
	@GO=$(GO) FUZZTIME=$(FUZZTIME) dev/fuzz.sh $(FUZZ_TARGETS)

# The issue-18 probe of the built gateway from the outside: bad input
# against every route family, planted secrets echoed by a provider, SIGKILL
# with work in flight (docs/probe.md). Exits 1 when a must-be-0 figure is
# not 0. `make probe PROBE_ARGS=-json`; the test suite runs a short one.
PROBE_ARGS ?= -requests 5000 -kills 10
probe: build
	$(GO) run ./dev/cmd/probe -binary bin/agentryd $(PROBE_ARGS)

# Non-deterministic calls (clocks, randomness, goroutines, map ranges) in
# workflow code; the tool is pinned by the tool directive in go.mod.
workflowcheck:
	$(GO) tool workflowcheck ./workflows/...

# Re-record the replay tests' histories from real runs (embedded Temporal,
# fake LLM) after a workflow change; see docs/decisions.md first.
replay-record:
	$(GO) test -count=1 -run TestRecord ./workflows/replay -update

fmt:
	gofmt -w $$(git ls-files '*.go')

bench:
	$(GO) test -run '^$$' -bench . -benchtime 2s ./...

clean:
	rm -rf bin
