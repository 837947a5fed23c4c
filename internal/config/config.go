// Package config holds the gateway's configuration: the config.yaml schema,
// its defaults, where the file is found, and AGENTRY_* environment overrides.
//
// Every field carries two tags: `yaml` (the key in config.yaml) and `env` (the
// same key upper-cased; the AGENTRY_ prefix and the parents' prefixes are added
// by go-envconfig). A test keeps the two in step. Keys we do not model yet are
// kept in `Extra` maps (yaml ",inline") so that reading and writing the file
// through the configuration API never drops them.
package config

import "time"

// Config is the whole config.yaml.
type Config struct {
	Server        ServerConfig      `yaml:"server" env:", prefix=SERVER_"`
	Runtime       RuntimeConfig     `yaml:"runtime" env:", prefix=RUNTIME_"`
	LLM           LLMConfig         `yaml:"llm" env:", prefix=LLM_"`
	Channels      ChannelsConfig    `yaml:"channels" env:", prefix=CHANNELS_"`
	MCP           map[string]any    `yaml:"mcp,omitempty"`
	Memory        MemoryConfig      `yaml:"memory" env:", prefix=MEMORY_"`
	Storage       StorageConfig     `yaml:"storage" env:", prefix=STORAGE_"`
	Vector        VectorConfig      `yaml:"vector,omitempty" env:", prefix=VECTOR_"`
	Queue         map[string]any    `yaml:"queue,omitempty"`
	Executor      ExecutorConfig    `yaml:"executor,omitempty" env:", prefix=EXECUTOR_"`
	Knowledge     KnowledgeConfig   `yaml:"knowledge" env:", prefix=KNOWLEDGE_"`
	Auth          AuthConfig        `yaml:"auth" env:", prefix=AUTH_"`
	Credentials   CredentialsConfig `yaml:"credentials" env:", prefix=CREDENTIALS_"`
	Updates       UpdatesConfig     `yaml:"updates" env:", prefix=UPDATES_"`
	RateLimit     RateLimitConfig   `yaml:"rate_limit" env:", prefix=RATE_LIMIT_"`
	Telemetry     TelemetryConfig   `yaml:"telemetry" env:", prefix=TELEMETRY_"`
	Hooks         []HookConfig      `yaml:"hooks,omitempty"`
	Voice         VoiceConfig       `yaml:"voice,omitempty" env:", prefix=VOICE_"`
	PluginsConfig map[string]any    `yaml:"plugins_config,omitempty"`
	Registries    []RegistryConfig  `yaml:"registries,omitempty"`
	AgentDirs     []string          `yaml:"agent_dirs,omitempty" env:"AGENT_DIRS"`
	SkillDirs     []string          `yaml:"skill_dirs,omitempty" env:"SKILL_DIRS"`
	PluginDirs    []string          `yaml:"plugin_dirs,omitempty" env:"PLUGIN_DIRS"`
	Log           LogConfig         `yaml:"log" env:", prefix=LOG_"`
	Costs         CostsConfig       `yaml:"costs" env:", prefix=COSTS_"`
	Temporal      TemporalConfig    `yaml:"temporal" env:", prefix=TEMPORAL_"`
	Workboard     WorkboardConfig   `yaml:"workboard" env:", prefix=WORKBOARD_"`
	CLI           CLIConfig         `yaml:"cli" env:", prefix=CLI_"`
	Extra         map[string]any    `yaml:",inline"`

	// PackageInstalls shapes `agentry package install` jobs.
	PackageInstalls PackageInstallsConfig `yaml:"package_installs,omitempty" env:", prefix=PACKAGE_INSTALLS_"`

	// Fleet is the start-up check that every process sharing the database
	// agrees on the fleet-wide settings (gateway/fleetconfig.go).
	Fleet FleetConfig `yaml:"fleet,omitempty" env:", prefix=FLEET_"`
}

// FleetConfig shapes the fleet configuration check (docs/scale.md).
type FleetConfig struct {
	// Rollout admits a process whose fleet-wide settings differ from the
	// running fleet's (a warning instead of a refused start): set it while
	// rolling a change out; the newest admitted configuration is then the
	// one later processes must match.
	Rollout bool `yaml:"rollout,omitempty" env:"ROLLOUT"`
}

// ServerConfig is the HTTP listener.
type ServerConfig struct {
	Host   string `yaml:"host" env:"HOST"`
	Port   int    `yaml:"port" env:"PORT"`
	APIKey string `yaml:"api_key,omitempty" env:"API_KEY"`
	// MaxBodyBytes bounds every request body; larger bodies get 413.
	MaxBodyBytes    int           `yaml:"max_body_bytes" env:"MAX_BODY_BYTES"`
	ShutdownTimeout time.Duration `yaml:"shutdown_timeout" env:"SHUTDOWN_TIMEOUT"`
	TLS             TLSConfig     `yaml:"tls" env:", prefix=TLS_"`
	CORS            CORSConfig    `yaml:"cors" env:", prefix=CORS_"`
	// GUI serves the operator console at /. Unset (nil) means on when Host
	// is a loopback address and off otherwise; see GUIEnabled. noinit keeps
	// go-envconfig from allocating it (as false) when AGENTRY_SERVER_GUI is
	// unset, which used to turn the console off on every default start.
	GUI *bool `yaml:"gui,omitempty" env:"GUI,noinit"`
	// Edition is personal (default), team or scale: team and scale refuse
	// stdio MCP registrations and non-HTTPS MCP endpoints.
	Edition string `yaml:"edition,omitempty" env:"EDITION"`
	// AdaptiveProcs lets agentryd run the Go scheduler on one processor
	// while it has about one goroutine to run at a time (internal/procs).
	// On by default; a GOMAXPROCS environment variable turns it off too.
	AdaptiveProcs bool `yaml:"adaptive_procs" env:"ADAPTIVE_PROCS"`
	// MemoryLimit is agentryd's soft memory limit (Go's GOMEMLIMIT syntax:
	// 512MiB, 1GiB; "0" or "off": none). A GOMEMLIMIT environment variable
	// wins. See cli/agentryd/gc.go.
	MemoryLimit string `yaml:"memory_limit" env:"MEMORY_LIMIT"`
	// GCPercent is agentryd's GOGC (0: Go's default, 100). 400 buys a few
	// per cent of chat throughput for more resident memory. A GOGC
	// environment variable wins.
	GCPercent int            `yaml:"gc_percent,omitempty" env:"GC_PERCENT"`
	Extra     map[string]any `yaml:",inline"`
}

// TLSConfig turns on HTTPS with a certificate pair.
type TLSConfig struct {
	Enabled  bool   `yaml:"enabled" env:"ENABLED"`
	CertFile string `yaml:"cert_file,omitempty" env:"CERT_FILE"`
	KeyFile  string `yaml:"key_file,omitempty" env:"KEY_FILE"`
	// CAFile and ServerName are used by clients (temporal.tls).
	CAFile     string `yaml:"ca_file,omitempty" env:"CA_FILE"`
	ServerName string `yaml:"server_name,omitempty" env:"SERVER_NAME"`
}

// CORSConfig is the browser origin allow-list; empty means no CORS headers.
type CORSConfig struct {
	AllowOrigins []string `yaml:"allow_origins,omitempty" env:"ALLOW_ORIGINS"`
}

// RuntimeConfig bounds what agents may do.
type RuntimeConfig struct {
	MaxSessions int            `yaml:"max_sessions" env:"MAX_SESSIONS"`
	MaxTurns    int            `yaml:"max_turns" env:"MAX_TURNS"`
	PythonPath  string         `yaml:"python_path,omitempty" env:"PYTHON_PATH"`
	ToolTimeout time.Duration  `yaml:"tool_timeout" env:"TOOL_TIMEOUT"`
	SystemTools []string       `yaml:"system_tools,omitempty" env:"SYSTEM_TOOLS"`
	SSRF        SSRFConfig     `yaml:"ssrf" env:", prefix=SSRF_"`
	AuditLog    AuditLogConfig `yaml:"audit_log" env:", prefix=AUDIT_LOG_"`
	// ActionLog records every agent run (agent, session, run, response ids) so
	// that feedback can be validated against it.
	ActionLog ActionLogConfig `yaml:"action_log" env:", prefix=ACTION_LOG_"`
	// Delivery bounds the retries of outbound webhook deliveries.
	Delivery DeliveryConfig `yaml:"delivery" env:", prefix=DELIVERY_"`
	Sandbox  SandboxConfig  `yaml:"sandbox,omitempty" env:", prefix=SANDBOX_"`

	// ToolOutputCap is the most bytes of one tool result the model is
	// shown; longer results are cut with a note (0: the default, 32 KiB).
	ToolOutputCap int `yaml:"tool_output_cap" env:"TOOL_OUTPUT_CAP"`

	Extra map[string]any `yaml:",inline"`
}

// PackageInstallsConfig shapes package install jobs
// (docs/package-install.md).
type PackageInstallsConfig struct {
	// HostBuildCatalog are the sources that may be built on the gateway
	// host: exact git URLs, or prefixes ending in "/". When set, only
	// these; team and scale editions build nothing without it.
	HostBuildCatalog []string `yaml:"host_build_catalog,omitempty" env:"HOST_BUILD_CATALOG"`
}

// SSRFConfig guards outbound HTTP made on an agent's or a channel's behalf.
type SSRFConfig struct {
	// Enabled refuses loopback, private, link-local and unspecified
	// addresses unless allowed below. On by default.
	Enabled       bool     `yaml:"enabled" env:"ENABLED"`
	AllowLoopback bool     `yaml:"allow_loopback" env:"ALLOW_LOOPBACK"`
	AllowPrivate  bool     `yaml:"allow_private" env:"ALLOW_PRIVATE"`
	AllowedHosts  []string `yaml:"allowed_hosts,omitempty" env:"ALLOWED_HOSTS"`
}

// AuditLogConfig writes one JSON line per mutating API call and per
// decision (docs/observability.md).
type AuditLogConfig struct {
	Enabled bool `yaml:"enabled" env:"ENABLED"`
	// File is the log file; relative paths are inside the workspace's logs
	// directory. Default: <workspace>/logs/audit.log.
	File string `yaml:"file,omitempty" env:"FILE"`
	// Path is the older name of File, still accepted.
	Path string `yaml:"path,omitempty" env:"PATH"`
	// Format is json (the only format; one object per line).
	Format string `yaml:"format,omitempty" env:"FORMAT"`
	// MaxSizeMB rotates the file when it grows past this size [100];
	// MaxFiles rotated files are kept [5].
	MaxSizeMB int `yaml:"max_size_mb,omitempty" env:"MAX_SIZE_MB"`
	MaxFiles  int `yaml:"max_files,omitempty" env:"MAX_FILES"`
}

// ActionLogConfig toggles the action log.
type ActionLogConfig struct {
	Enabled bool `yaml:"enabled" env:"ENABLED"`
}

// DeliveryConfig is the retry policy of outbound deliveries: exponential
// backoff from initial_interval, doubling up to max_interval, until
// retry_for has passed since the first attempt.
type DeliveryConfig struct {
	RetryFor        time.Duration `yaml:"retry_for" env:"RETRY_FOR"`
	InitialInterval time.Duration `yaml:"initial_interval" env:"INITIAL_INTERVAL"`
	MaxInterval     time.Duration `yaml:"max_interval" env:"MAX_INTERVAL"`
	AttemptTimeout  time.Duration `yaml:"attempt_timeout" env:"ATTEMPT_TIMEOUT"`
}

// LLMConfig is the provider registry and the workspace allowlists.
type LLMConfig struct {
	DefaultProvider         string                    `yaml:"default_provider" env:"DEFAULT_PROVIDER"`
	Providers               map[string]ProviderConfig `yaml:"providers"`
	AllowedProviders        []string                  `yaml:"allowed_providers,omitempty" env:"ALLOWED_PROVIDERS"`
	AllowedModels           []string                  `yaml:"allowed_models,omitempty" env:"ALLOWED_MODELS"`
	AllowedRegions          []string                  `yaml:"allowed_regions,omitempty" env:"ALLOWED_REGIONS"`
	CacheAllowedDataClasses []string                  `yaml:"cache_allowed_data_classes,omitempty" env:"CACHE_ALLOWED_DATA_CLASSES"`
	Studio                  StudioConfig              `yaml:"studio" env:", prefix=STUDIO_"`
	Extra                   map[string]any            `yaml:",inline"`
}

// ProviderConfig is one entry of llm.providers.
type ProviderConfig struct {
	// Type is the wire protocol: openai (any OpenAI-compatible server), anthropic or ollama.
	Type    string `yaml:"type" env:"TYPE"`
	BaseURL string `yaml:"base_url,omitempty" env:"BASE_URL"`
	// APIKeyEnv names the environment variable holding the key; preferred to APIKey.
	APIKeyEnv string `yaml:"api_key_env,omitempty" env:"API_KEY_ENV"`
	APIKey    string `yaml:"api_key,omitempty" env:"API_KEY"`
	// APIKeySecret names a secret of the gateway's secret store holding the
	// key (what `agentry onboard` writes); preferred to APIKeyEnv and APIKey.
	APIKeySecret       string         `yaml:"api_key_secret,omitempty" env:"API_KEY_SECRET"`
	DefaultModel       string         `yaml:"default_model,omitempty" env:"DEFAULT_MODEL"`
	Models             []string       `yaml:"models,omitempty" env:"MODELS"`
	Region             string         `yaml:"region,omitempty" env:"REGION"`
	Retention          string         `yaml:"retention,omitempty" env:"RETENTION"`
	Local              bool           `yaml:"local,omitempty" env:"LOCAL"`
	AllowedDataClasses []string       `yaml:"allowed_data_classes,omitempty" env:"ALLOWED_DATA_CLASSES"`
	MaxTokensPerMinute int            `yaml:"max_tokens_per_minute,omitempty" env:"MAX_TOKENS_PER_MINUTE"`
	PromptCaching      bool           `yaml:"prompt_caching,omitempty" env:"PROMPT_CACHING"`
	Timeout            time.Duration  `yaml:"timeout,omitempty" env:"TIMEOUT"`
	MaxRetries         int            `yaml:"max_retries,omitempty" env:"MAX_RETRIES"`
	Extra              map[string]any `yaml:",inline"`
}

// VoiceConfig is realtime voice (docs/voice.md): an OpenAI-Realtime-
// compatible provider the gateway mints short-lived client sessions with.
// Keys this version does not know are kept in Extra (files written for the
// older free-form section still load).
type VoiceConfig struct {
	// Provider names the provider in the ledger and costs.pricing
	// (<provider>/<model>); empty turns voice off.
	Provider string `yaml:"provider,omitempty" env:"PROVIDER"`
	Model    string `yaml:"model,omitempty" env:"MODEL"`
	// BaseURL is the API root (https://api.openai.com/v1 when empty).
	BaseURL string `yaml:"base_url,omitempty" env:"BASE_URL"`
	// APIKeyEnv names the variable holding the provider key; preferred to APIKey.
	APIKeyEnv string `yaml:"api_key_env,omitempty" env:"API_KEY_ENV"`
	APIKey    string `yaml:"api_key,omitempty" env:"API_KEY"`
	// MaxSessionSeconds caps a session's length [300]; the worst case of
	// that length is reserved before a session is minted.
	MaxSessionSeconds int            `yaml:"max_session_seconds,omitempty" env:"MAX_SESSION_SECONDS"`
	Extra             map[string]any `yaml:",inline"`
}

// StudioConfig is the per-build allowance of the builder surface.
type StudioConfig struct {
	MaxBuildTokens  int     `yaml:"max_build_tokens,omitempty" env:"MAX_BUILD_TOKENS"`
	MaxBuildCostUSD float64 `yaml:"max_build_cost_usd,omitempty" env:"MAX_BUILD_COST_USD"`
}

// ChannelsConfig holds channel adapters keyed by channel id: the outbound
// webhook, and messaging channels (channels.<id>, internal/channels).
type ChannelsConfig struct {
	Webhook WebhookChannelConfig `yaml:"webhook" env:", prefix=WEBHOOK_"`
	// Messaging are the messaging-platform channels by id. The id is the
	// platform's name unless type says otherwise (two Telegram bots:
	// channels.support {type: telegram} and channels.sales {type:
	// telegram}). Environment: AGENTRY_CHANNELS_<ID>_<KEY>.
	Messaging map[string]MessagingChannelConfig `yaml:",inline"`
}

// MessagingChannelConfig is one messaging-platform channel (docs/channels.md).
type MessagingChannelConfig struct {
	// Type is telegram, slack, discord or whatsapp ("" = the channel id).
	Type    string `yaml:"type,omitempty"`
	Enabled bool   `yaml:"enabled"`
	// Agent answers the channel's messages.
	Agent string `yaml:"agent,omitempty"`
	// Mode: telegram polling (default) | webhook; slack events (default) | socket.
	Mode string `yaml:"mode,omitempty"`
	// APIBaseURL is the platform API root (self-hosted Telegram Bot API
	// servers, tests); "" is the platform's own.
	APIBaseURL string `yaml:"api_base_url,omitempty"`
	// PublicURL is the gateway's public address of this channel's ingress
	// (Telegram webhook mode registers it with setWebhook).
	PublicURL string `yaml:"public_url,omitempty"`
	// Credentials (secrets: redacted in every view, never logged).
	BotToken      string `yaml:"bot_token,omitempty"`
	SigningSecret string `yaml:"signing_secret,omitempty"`
	AppToken      string `yaml:"app_token,omitempty"`
	SecretToken   string `yaml:"secret_token,omitempty"`
	// Activation.
	Trigger      string   `yaml:"trigger,omitempty"`
	AllowGroups  bool     `yaml:"allow_groups,omitempty"`
	AllowedChats []string `yaml:"allowed_chats,omitempty"`
	AllowedUsers []string `yaml:"allowed_users,omitempty"`
}

// MessagingTypes are the platforms a messaging channel can be.
var MessagingTypes = []string{"telegram", "slack", "discord", "whatsapp"}

// TypeOf is the channel's platform: its type, else its id.
func (m MessagingChannelConfig) TypeOf(id string) string {
	if m.Type != "" {
		return m.Type
	}
	return id
}

// WebhookChannelConfig is the outbound webhook delivery channel.
type WebhookChannelConfig struct {
	Enabled bool   `yaml:"enabled" env:"ENABLED"`
	URL     string `yaml:"url,omitempty" env:"URL"`
	Method  string `yaml:"method,omitempty" env:"METHOD"`
	// Headers is multi-line text of "Name: value" lines.
	Headers string `yaml:"headers,omitempty" env:"HEADERS"`
	Secret  string `yaml:"secret,omitempty" env:"SECRET"`
}

// StorageConfig selects the application database.
type StorageConfig struct {
	// Backend is sqlite (embedded default) or postgres.
	Backend string `yaml:"backend" env:"BACKEND"`
	// DSN is the PostgreSQL connection string, or the SQLite file path
	// (default <workspace>/data/agentry.db).
	DSN          string `yaml:"dsn,omitempty" env:"DSN"`
	MaxOpenConns int    `yaml:"max_open_conns,omitempty" env:"MAX_OPEN_CONNS"`
	// WriteQueue bounds the writes waiting for SQLite's single writer (the
	// group commit); past it requests are shed with 503 and Retry-After.
	// 0 takes models.DefaultGroupQueue.
	WriteQueue int `yaml:"write_queue,omitempty" env:"WRITE_QUEUE"`
	// CommitLinger is how long SQLite's writer may keep its transaction
	// open for more batches, each acknowledged from the redo log (see
	// models.redoLog). 0 takes models.DefaultLinger (20 ms); a negative value
	// commits every batch.
	CommitLinger time.Duration  `yaml:"commit_linger,omitempty" env:"COMMIT_LINGER"`
	SQLite       SQLiteConfig   `yaml:"sqlite,omitempty" env:", prefix=SQLITE_"`
	Extra        map[string]any `yaml:",inline"`
}

// SQLiteConfig holds the embedded database's settings.
type SQLiteConfig struct {
	// Durability is what an acknowledged write survives: process (a crash
	// of the gateway process) or power (a power cut or kernel crash too:
	// fsync before the reply, group-committed). Empty picks power when
	// costs.enforcement_mode is hard, else process (see Config.Durability).
	Durability string `yaml:"durability,omitempty" env:"DURABILITY"`
}

// Durability levels of storage.sqlite.durability.
const (
	DurabilityProcess = "process"
	DurabilityPower   = "power"
)

// Durability is storage.sqlite.durability in effect: the setting, or power
// when hard budgets rely on the ledger (a lost acknowledged row could let a
// hard budget overshoot), else process.
func (c *Config) Durability() string {
	if d := c.Storage.SQLite.Durability; d != "" {
		return d
	}
	if c.Costs.EnforcementMode == "hard" {
		return DurabilityPower
	}
	return DurabilityProcess
}

// AuthConfig selects how /api/v1 callers authenticate.
type AuthConfig struct {
	// Mode is apikey (default) or jwt.
	Mode string `yaml:"mode" env:"MODE"`
	// Keys are extra API keys with their roles (apikey mode); server.api_key is always admin.
	Keys []APIKeyConfig `yaml:"keys,omitempty"`
	JWT  JWTConfig      `yaml:"jwt" env:", prefix=JWT_"`
	OIDC OIDCConfig     `yaml:"oidc" env:", prefix=OIDC_"`
}

// APIKeyConfig is a named API key with a role.
type APIKeyConfig struct {
	Subject string `yaml:"subject"`
	Key     string `yaml:"key,omitempty"`
	KeyEnv  string `yaml:"key_env,omitempty"`
	Role    string `yaml:"role"`
	// TrustUserID makes the request's user_id the subject of per-user
	// budgets, quotas and chargeback (as <subject>:<user_id>), for one
	// application key serving many end users. Only the configuration sets
	// it, that is an admin.
	TrustUserID bool `yaml:"trust_user_id,omitempty"`
	// Agents, when set, are the only agents the key may run (chat, the
	// OpenAI-compatible endpoint, the MCP server): another answers 403.
	Agents []string `yaml:"agents,omitempty"`
}

// JWTConfig is HS256 access tokens.
type JWTConfig struct {
	Secret     string        `yaml:"secret,omitempty" env:"SECRET"`
	SecretEnv  string        `yaml:"secret_env,omitempty" env:"SECRET_ENV"`
	AccessTTL  time.Duration `yaml:"access_ttl" env:"ACCESS_TTL"`
	RefreshTTL time.Duration `yaml:"refresh_ttl" env:"REFRESH_TTL"`
	Issuer     string        `yaml:"issuer,omitempty" env:"ISSUER"`
	Audience   string        `yaml:"audience,omitempty" env:"AUDIENCE"`
	// RoleClaim names the claim carrying the role (default "role").
	RoleClaim string `yaml:"role_claim" env:"ROLE_CLAIM"`
}

// OIDCConfig accepts RS256 tokens from an external issuer.
type OIDCConfig struct {
	Issuer   string `yaml:"issuer,omitempty" env:"ISSUER"`
	JWKSURL  string `yaml:"jwks_url,omitempty" env:"JWKS_URL"`
	Audience string `yaml:"audience,omitempty" env:"AUDIENCE"`
}

// CredentialsConfig selects the credential vault: the provider that wraps
// the secret store's data keys (internal/secrets, docs/credentials.md).
type CredentialsConfig struct {
	// Provider is local (the key file, default), hashivault (Vault or
	// OpenBao transit), awskms, gcpkms or azurekeyvault.
	Provider string `yaml:"provider" env:"PROVIDER"`
	// KeyURL names the provider's key as a gocloud.dev secrets URL
	// (hashivault://agentry, awskms://alias/agentry?region=eu-west-1, ...).
	KeyURL string `yaml:"key_url,omitempty" env:"KEY_URL"`
	// VaultAddress is Vault's base URL (hashivault; else VAULT_ADDR).
	VaultAddress string `yaml:"vault_address,omitempty" env:"VAULT_ADDRESS"`
	// VaultTokenEnv names the environment variable holding Vault's token
	// [VAULT_TOKEN]; VaultTokenFile, when set, is read instead.
	VaultTokenEnv  string `yaml:"vault_token_env,omitempty" env:"VAULT_TOKEN_ENV"`
	VaultTokenFile string `yaml:"vault_token_file,omitempty" env:"VAULT_TOKEN_FILE"`
	// CacheTTL is how long an unwrapped data key serves reads without
	// asking the provider again [1h].
	CacheTTL time.Duration `yaml:"cache_ttl,omitempty" env:"CACHE_TTL"`
	// Timeout bounds one call to the provider [10s].
	Timeout time.Duration  `yaml:"timeout,omitempty" env:"TIMEOUT"`
	Extra   map[string]any `yaml:",inline"`
}

// CredentialProviders are the values of credentials.provider.
var CredentialProviders = []string{"local", "hashivault", "awskms", "gcpkms", "azurekeyvault"}

// UpdatesConfig points at the release manifest.
type UpdatesConfig struct {
	ManifestURL string `yaml:"manifest_url,omitempty" env:"MANIFEST_URL"`
}

// RateLimitConfig is the per-user / per-agent request and token quotas.
type RateLimitConfig struct {
	Enabled           bool   `yaml:"enabled" env:"ENABLED"`
	Backend           string `yaml:"backend" env:"BACKEND"`
	RedisURL          string `yaml:"redis_url,omitempty" env:"REDIS_URL"`
	PerUserRPM        int    `yaml:"per_user_rpm,omitempty" env:"PER_USER_RPM"`
	PerUserTokensDay  int64  `yaml:"per_user_tokens_day,omitempty" env:"PER_USER_TOKENS_DAY"`
	PerAgentTokensDay int64  `yaml:"per_agent_tokens_day,omitempty" env:"PER_AGENT_TOKENS_DAY"`
}

// TelemetryConfig is tracing export and the Prometheus metrics endpoint
// (docs/observability.md).
type TelemetryConfig struct {
	// Exporter is otlp (OTLP/HTTP), otlp-grpc, stdout or none [none].
	Exporter string `yaml:"exporter,omitempty" env:"EXPORTER"`
	// Endpoint is the OTLP receiver: a URL (http://collector:4318) or
	// host:port. Empty: the OTel default (localhost:4318, or 4317 for gRPC).
	Endpoint string `yaml:"endpoint,omitempty" env:"ENDPOINT"`
	// OTLPEndpoint is the older name of Endpoint, still accepted.
	OTLPEndpoint string `yaml:"otlp_endpoint,omitempty" env:"OTLP_ENDPOINT"`
	// Headers are sent with every export (e.g. an API key of a hosted backend).
	Headers     map[string]string `yaml:"headers,omitempty" env:"HEADERS"`
	ServiceName string            `yaml:"service_name,omitempty" env:"SERVICE_NAME"`
	// SampleRatio is the share of new traces recorded, 0..1 [1]. A trace
	// started by a caller (traceparent header) keeps the caller's decision.
	SampleRatio float64 `yaml:"sample_ratio" env:"SAMPLE_RATIO"`
	// CaptureContent records prompts, replies and tool arguments on spans.
	// Off by default: spans then carry sizes, counts and ids only.
	CaptureContent bool          `yaml:"capture_content,omitempty" env:"CAPTURE_CONTENT"`
	Metrics        MetricsConfig `yaml:"metrics" env:", prefix=METRICS_"`
}

// MetricsConfig is GET /metrics.
type MetricsConfig struct {
	// Enabled serves /metrics [true].
	Enabled bool `yaml:"enabled" env:"ENABLED"`
	// Public serves /metrics without the API key.
	Public bool `yaml:"public,omitempty" env:"PUBLIC"`
	// Listen is an extra address (host:port) serving only /metrics, without
	// authentication (bind it where only the scraper reaches it).
	Listen string `yaml:"listen,omitempty" env:"LISTEN"`
	// Pprof also serves Go's profiler (/debug/pprof/) on the Listen address,
	// to profile a gateway under load. Off by default.
	Pprof bool `yaml:"pprof,omitempty" env:"PPROF"`
}

// HookConfig is one signed outbound event hook.
type HookConfig struct {
	On        []string `yaml:"on"`
	Agents    []string `yaml:"agents,omitempty"`
	URL       string   `yaml:"url"`
	SecretEnv string   `yaml:"secret_env,omitempty"`
}

// RegistryConfig is one package registry.
type RegistryConfig struct {
	ID          string            `yaml:"id"`
	Type        string            `yaml:"type,omitempty"`
	BaseURL     string            `yaml:"base_url"`
	Priority    int               `yaml:"priority,omitempty"`
	AuthHeaders map[string]string `yaml:"auth_headers,omitempty"`
	SigningKey  string            `yaml:"signing_key,omitempty"`
}

// LogConfig is the gateway's own log.
type LogConfig struct {
	Level  string `yaml:"level" env:"LEVEL"`
	Format string `yaml:"format" env:"FORMAT"`
	File   string `yaml:"file,omitempty" env:"FILE"`
}

// CostsConfig is LLM cost governance.
type CostsConfig struct {
	EnforcementMode          string        `yaml:"enforcement_mode" env:"ENFORCEMENT_MODE"`
	UnknownPricing           string        `yaml:"unknown_pricing" env:"UNKNOWN_PRICING"`
	DailyBudgetUSD           float64       `yaml:"daily_budget_usd,omitempty" env:"DAILY_BUDGET_USD"`
	MonthlyBudgetUSD         float64       `yaml:"monthly_budget_usd,omitempty" env:"MONTHLY_BUDGET_USD"`
	PerUserDailyBudgetUSD    float64       `yaml:"per_user_daily_budget_usd,omitempty" env:"PER_USER_DAILY_BUDGET_USD"`
	PerAgentDailyBudgetUSD   float64       `yaml:"per_agent_daily_budget_usd,omitempty" env:"PER_AGENT_DAILY_BUDGET_USD"`
	AlertThreshold           float64       `yaml:"alert_threshold" env:"ALERT_THRESHOLD"`
	DefaultMaxOutputTokens   int           `yaml:"default_max_output_tokens" env:"DEFAULT_MAX_OUTPUT_TOKENS"`
	MaxOutputTokensCeiling   int           `yaml:"max_output_tokens_ceiling" env:"MAX_OUTPUT_TOKENS_CEILING"`
	ConfirmationThresholdUSD float64       `yaml:"confirmation_threshold_usd,omitempty" env:"CONFIRMATION_THRESHOLD_USD"`
	ReservationTTL           time.Duration `yaml:"reservation_ttl" env:"RESERVATION_TTL"`
	MaxConcurrentPerProvider int           `yaml:"max_concurrent_per_provider,omitempty" env:"MAX_CONCURRENT_PER_PROVIDER"`
	CircuitFailureThreshold  int           `yaml:"circuit_failure_threshold" env:"CIRCUIT_FAILURE_THRESHOLD"`
	CircuitCooldown          time.Duration `yaml:"circuit_cooldown" env:"CIRCUIT_COOLDOWN"`
	// RunBudgetWait bounds how long, in all, a task run may park waiting
	// for budget (a hard budget or token quota refusing its next turn)
	// before it fails; 0 fails it at the first refusal.
	RunBudgetWait  time.Duration          `yaml:"run_budget_wait" env:"RUN_BUDGET_WAIT"`
	Pricing        map[string]PriceConfig `yaml:"pricing,omitempty"`
	Reconciliation ReconciliationConfig   `yaml:"reconciliation" env:", prefix=RECONCILIATION_"`
	Extra          map[string]any         `yaml:",inline"`
}

// PriceConfig is the price of one provider/model, per million tokens.
type PriceConfig struct {
	InputPerMTok       float64 `yaml:"input_per_mtok"`
	OutputPerMTok      float64 `yaml:"output_per_mtok"`
	CachedInputPerMTok float64 `yaml:"cached_input_per_mtok,omitempty"`
	Source             string  `yaml:"source,omitempty"`
	// EffectiveDate is YYYY-MM-DD; the price applies from that UTC day on.
	EffectiveDate string `yaml:"effective_date,omitempty"`
	Version       string `yaml:"version,omitempty"`
}

// ReconciliationConfig compares the ledger with provider usage exports.
type ReconciliationConfig struct {
	Enabled                bool                                    `yaml:"enabled" env:"ENABLED"`
	Interval               time.Duration                           `yaml:"interval" env:"INTERVAL"`
	VarianceAlertThreshold float64                                 `yaml:"variance_alert_threshold" env:"VARIANCE_ALERT_THRESHOLD"`
	Providers              map[string]ReconciliationProviderConfig `yaml:"providers,omitempty"`
}

// ReconciliationProviderConfig is where one provider's usage export is read.
type ReconciliationProviderConfig struct {
	Type         string `yaml:"type"`
	BaseURL      string `yaml:"base_url,omitempty"`
	APIKeyEnv    string `yaml:"api_key_env,omitempty"`
	Organization string `yaml:"organization,omitempty"`
}

// TemporalConfig selects the embedded Temporal server or an external cluster.
type TemporalConfig struct {
	// Address of an external cluster (host:port). Empty starts the embedded server.
	Address   string    `yaml:"address,omitempty" env:"ADDRESS"`
	Namespace string    `yaml:"namespace" env:"NAMESPACE"`
	TaskQueue string    `yaml:"task_queue" env:"TASK_QUEUE"`
	APIKey    string    `yaml:"api_key,omitempty" env:"API_KEY"`
	TLS       TLSConfig `yaml:"tls" env:", prefix=TLS_"`
	// UIURL is the Temporal Web UI's address for links (the console's run
	// panel); empty: the embedded UI's, when it runs.
	UIURL    string                 `yaml:"ui_url,omitempty" env:"UI_URL"`
	Embedded EmbeddedTemporalConfig `yaml:"embedded" env:", prefix=EMBEDDED_"`
	Worker   WorkerConfig           `yaml:"worker" env:", prefix=WORKER_"`
}

// EmbeddedTemporalConfig is the in-process Temporal server.
type EmbeddedTemporalConfig struct {
	Host         string `yaml:"host" env:"HOST"`
	FrontendPort int    `yaml:"frontend_port" env:"FRONTEND_PORT"`
	UIPort       int    `yaml:"ui_port" env:"UI_PORT"`
	UIEnabled    bool   `yaml:"ui_enabled" env:"UI_ENABLED"`
}

// WorkerConfig controls the in-process Temporal worker.
type WorkerConfig struct {
	Enabled bool `yaml:"enabled" env:"ENABLED"`
}

// WorkboardConfig switches the task board on or off.
type WorkboardConfig struct {
	Enabled bool `yaml:"enabled" env:"ENABLED"`
}

// CLIConfig is read by the agentry client only.
type CLIConfig struct {
	GatewayURL    string                   `yaml:"gateway_url,omitempty" env:"GATEWAY_URL"`
	ActiveContext string                   `yaml:"active_context,omitempty" env:"ACTIVE_CONTEXT"`
	Contexts      map[string]ContextConfig `yaml:"contexts,omitempty"`
}

// ContextConfig is a named gateway target of the client.
type ContextConfig struct {
	GatewayURL string `yaml:"gateway_url"`
	APIKey     string `yaml:"api_key,omitempty"`
}
