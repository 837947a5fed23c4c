package config

import "time"

// DefaultRunBudgetWait is costs.run_budget_wait when unset: long enough for
// a person to raise a budget or for reservations to be released, short
// enough not to hold a task overnight (set 24h to wait for a daily budget
// to roll over).
const DefaultRunBudgetWait = time.Hour

// DefaultMemoryLimit is server.memory_limit when unset: a soft limit that
// makes Go's collector work harder only when the heap nears it, well above
// the gateway's heap under chat load (docs/benchmarks.md).
const DefaultMemoryLimit = "512MiB"

// Defaults is the configuration of a fresh install: loopback only, port
// 18789, the embedded Temporal server and SQLite, Ollama as the provider.
func Defaults() Config {
	return Config{
		Server: ServerConfig{
			Host:            "127.0.0.1",
			Port:            18789,
			MaxBodyBytes:    4 << 20,
			ShutdownTimeout: 10 * time.Second,
			AdaptiveProcs:   true,
			MemoryLimit:     DefaultMemoryLimit,
		},
		Runtime: RuntimeConfig{
			MaxSessions: 1000,
			MaxTurns:    8,
			ToolTimeout: 30 * time.Second,
			SSRF:        SSRFConfig{Enabled: true},
			ActionLog:   ActionLogConfig{Enabled: true},
			Delivery:    DeliveryConfig{RetryFor: 24 * time.Hour, InitialInterval: time.Second, MaxInterval: 10 * time.Minute, AttemptTimeout: 30 * time.Second},
		},
		LLM: LLMConfig{
			DefaultProvider: "ollama",
			Providers: map[string]ProviderConfig{
				"ollama": {Type: "ollama", BaseURL: "http://127.0.0.1:11434", Local: true, DefaultModel: "llama3.2"},
			},
		},
		Memory:      defaultMemory(),
		Storage:     StorageConfig{Backend: "sqlite"},
		Auth:        AuthConfig{Mode: "apikey", JWT: JWTConfig{AccessTTL: 15 * time.Minute, RefreshTTL: 30 * 24 * time.Hour, RoleClaim: "role"}},
		Credentials: CredentialsConfig{Provider: "local"},
		RateLimit:   RateLimitConfig{Backend: "memory"},
		Log:         LogConfig{Level: "info", Format: "console"},
		Costs: CostsConfig{
			EnforcementMode:         "soft",
			UnknownPricing:          "block",
			AlertThreshold:          0.8,
			DefaultMaxOutputTokens:  4096,
			MaxOutputTokensCeiling:  32768,
			ReservationTTL:          15 * time.Minute,
			CircuitFailureThreshold: 5,
			CircuitCooldown:         30 * time.Second,
			RunBudgetWait:           DefaultRunBudgetWait,
			Reconciliation:          ReconciliationConfig{Interval: time.Hour, VarianceAlertThreshold: 0.05},
		},
		Temporal: TemporalConfig{
			Namespace: "default",
			TaskQueue: "agentry",
			Embedded:  EmbeddedTemporalConfig{Host: "127.0.0.1", FrontendPort: 7233, UIPort: 8233, UIEnabled: true},
			Worker:    WorkerConfig{Enabled: true},
		},
		Workboard: WorkboardConfig{Enabled: true},
		Knowledge: KnowledgeDefaults(),
		Telemetry: TelemetryConfig{SampleRatio: 1, Metrics: MetricsConfig{Enabled: true}},
	}
}
