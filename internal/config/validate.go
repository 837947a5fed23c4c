package config

import (
	"encoding/hex"
	"errors"
	"fmt"
	"net/url"
	"reflect"
	"slices"
	"sort"
	"strings"
	"time"
)

// Validate checks values that parse but make no sense. Errors name the key.
func Validate(c *Config) error {
	var errs []error
	bad := func(key, format string, args ...any) {
		errs = append(errs, fmt.Errorf("%s: %s", key, fmt.Sprintf(format, args...)))
	}
	if u := Unsupported(c); u != nil {
		// One error naming every key this version would ignore (unsupported.go).
		errs = append(errs, u)
	}
	for _, key := range nonFinite(reflect.ValueOf(c).Elem(), "") {
		bad(key, "must be a finite number (not NaN or infinity)")
	}
	validateChannels(c.Channels.Messaging, bad)
	validateMemory(c.Memory, bad)
	validateVector(c, bad)
	validateKnowledge(&c.Knowledge, bad)
	validateSandbox(c, bad)
	validateCredentials(&c.Credentials, bad)
	validateVoice(c.Voice, bad)
	if c.Server.Port < 0 || c.Server.Port > 65535 {
		bad("server.port", "%d is not a TCP port (0-65535)", c.Server.Port)
	}
	if c.Server.MaxBodyBytes <= 0 {
		bad("server.max_body_bytes", "must be positive")
	}
	switch c.Server.Edition {
	case "", "personal", "team", "scale":
	default:
		bad("server.edition", "unknown edition %q (use personal, team or scale)", c.Server.Edition)
	}
	if _, err := ParseMemoryLimit(c.Server.MemoryLimit); err != nil {
		bad("server.memory_limit", "%v", err)
	}
	if c.Server.GCPercent < 0 {
		bad("server.gc_percent", "must not be negative (0 keeps Go's default, 100)")
	}
	if c.Server.TLS.Enabled && (c.Server.TLS.CertFile == "" || c.Server.TLS.KeyFile == "") {
		bad("server.tls", "enabled needs cert_file and key_file")
	}
	switch c.Auth.Mode {
	case "apikey":
	case "jwt":
		if c.Auth.JWT.Secret == "" && c.Auth.JWT.SecretEnv == "" && c.Auth.OIDC.Issuer == "" {
			bad("auth.jwt.secret", "jwt mode needs auth.jwt.secret, auth.jwt.secret_env or auth.oidc.issuer")
		}
	default:
		bad("auth.mode", "unknown mode %q (use apikey or jwt)", c.Auth.Mode)
	}
	for i, k := range c.Auth.Keys {
		if !slices.Contains(Roles, k.Role) {
			bad(fmt.Sprintf("auth.keys[%d].role", i), "unknown role %q (use one of %v)", k.Role, Roles)
		}
		if k.Key == "" && k.KeyEnv == "" {
			bad(fmt.Sprintf("auth.keys[%d]", i), "needs key or key_env")
		}
	}
	if !slices.Contains([]string{"debug", "info", "warn", "error"}, c.Log.Level) {
		bad("log.level", "unknown level %q (use debug, info, warn or error)", c.Log.Level)
	}
	if !slices.Contains([]string{"json", "console"}, c.Log.Format) {
		bad("log.format", "unknown format %q (use json or console)", c.Log.Format)
	}
	if !slices.Contains([]string{"sqlite", "postgres", "external"}, c.Storage.Backend) {
		bad("storage.backend", "unknown backend %q (use sqlite or postgres)", c.Storage.Backend)
	}
	if d := c.Storage.SQLite.Durability; d != "" && d != DurabilityProcess && d != DurabilityPower {
		bad("storage.sqlite.durability", "unknown value %q (use process or power)", d)
	}
	if c.Storage.CommitLinger > time.Minute {
		bad("storage.commit_linger", "%s is too long (at most 1m)", c.Storage.CommitLinger)
	}
	if c.Storage.Backend == "postgres" && c.Storage.DSN == "" {
		bad("storage.dsn", "the postgres backend needs a DSN")
	}
	for id, p := range c.LLM.Providers {
		if !slices.Contains([]string{"openai", "anthropic", "ollama"}, p.Type) {
			bad("llm.providers."+id+".type", "unknown provider type %q (use openai, anthropic or ollama)", p.Type)
		}
		if p.BaseURL != "" {
			if u, err := url.Parse(p.BaseURL); err != nil || (u.Scheme != "http" && u.Scheme != "https") {
				bad("llm.providers."+id+".base_url", "%q is not an http(s) URL", p.BaseURL)
			}
		}
		if p.MaxTokensPerMinute < 0 {
			bad("llm.providers."+id+".max_tokens_per_minute", "must not be negative")
		}
	}
	if c.LLM.DefaultProvider != "" {
		if _, ok := c.LLM.Providers[c.LLM.DefaultProvider]; !ok {
			bad("llm.default_provider", "%q is not in llm.providers", c.LLM.DefaultProvider)
		}
	}
	for key, d := range map[string]time.Duration{"retry_for": c.Runtime.Delivery.RetryFor, "initial_interval": c.Runtime.Delivery.InitialInterval,
		"max_interval": c.Runtime.Delivery.MaxInterval, "attempt_timeout": c.Runtime.Delivery.AttemptTimeout} {
		if d < 0 {
			bad("runtime.delivery."+key, "must not be negative")
		}
	}
	validateCosts(&c.Costs, bad)
	if c.RateLimit.Backend != "memory" && c.RateLimit.Backend != "redis" {
		bad("rate_limit.backend", "unknown backend %q (use memory or redis)", c.RateLimit.Backend)
	}
	if c.RateLimit.Backend == "redis" && c.RateLimit.Enabled && c.RateLimit.RedisURL == "" {
		bad("rate_limit.redis_url", "the redis backend needs redis_url")
	}
	for i, h := range c.Hooks {
		if h.URL == "" {
			bad(fmt.Sprintf("hooks[%d].url", i), "is required")
		}
	}
	validateTelemetry(c, bad)
	validateRegistries(c.Registries, bad)
	return errors.Join(errs...)
}

func validateTelemetry(c *Config, bad func(key, format string, args ...any)) {
	t := c.Telemetry
	if !slices.Contains([]string{"", "none", "otlp", "otlp-http", "otlp-grpc", "stdout"}, t.Exporter) {
		bad("telemetry.exporter", "unknown exporter %q (use otlp, otlp-grpc, stdout or none)", t.Exporter)
	}
	if r := t.SampleRatio; r < 0 || r > 1 {
		bad("telemetry.sample_ratio", "%v is not between 0 and 1", r)
	}
	if a := c.Runtime.AuditLog; a.Format != "" && a.Format != "json" {
		bad("runtime.audit_log.format", "unknown format %q (use json)", a.Format)
	}
	if a := c.Runtime.AuditLog; a.MaxSizeMB < 0 || a.MaxFiles < 0 {
		bad("runtime.audit_log", "max_size_mb and max_files must not be negative")
	}
}

// validateRegistries checks the registries: entries (docs/registry.md).
func validateRegistries(regs []RegistryConfig, bad func(key, format string, args ...any)) {
	seen := map[string]bool{}
	for i, r := range regs {
		key := fmt.Sprintf("registries[%d]", i)
		if r.ID == "" {
			bad(key+".id", "is required")
		} else if seen[r.ID] {
			bad(key+".id", "%q is used twice", r.ID)
		}
		seen[r.ID] = true
		if r.Type != "" && r.Type != "agentry" && r.Type != "github" {
			bad(key+".type", "unknown type %q (use agentry or github)", r.Type)
		}
		if r.BaseURL == "" && r.Type != "github" {
			bad(key+".base_url", "is required")
		} else if r.BaseURL != "" {
			if u, err := url.Parse(r.BaseURL); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
				bad(key+".base_url", "%q is not an http(s) URL", r.BaseURL)
			}
		}
		if r.Priority < 0 {
			bad(key+".priority", "must not be negative")
		}
		if k, err := hex.DecodeString(r.SigningKey); r.SigningKey != "" && (err != nil || len(k) != 32) {
			bad(key+".signing_key", "is not a hex Ed25519 public key (64 hex digits)")
		}
	}
}

func validateCosts(c *CostsConfig, bad func(key, format string, args ...any)) {
	if !slices.Contains([]string{"off", "soft", "hard"}, c.EnforcementMode) {
		bad("costs.enforcement_mode", "unknown mode %q (use off, soft or hard)", c.EnforcementMode)
	}
	if !slices.Contains([]string{"allow", "block"}, c.UnknownPricing) {
		bad("costs.unknown_pricing", "unknown value %q (use allow or block)", c.UnknownPricing)
	}
	if c.RunBudgetWait < 0 {
		bad("costs.run_budget_wait", "must not be negative (0 fails a run at the first budget refusal)")
	}
	for key, v := range map[string]float64{
		"daily_budget_usd": c.DailyBudgetUSD, "monthly_budget_usd": c.MonthlyBudgetUSD,
		"per_user_daily_budget_usd": c.PerUserDailyBudgetUSD, "per_agent_daily_budget_usd": c.PerAgentDailyBudgetUSD,
		"confirmation_threshold_usd": c.ConfirmationThresholdUSD,
	} {
		if v < 0 {
			bad("costs."+key, "must not be negative")
		}
	}
	if c.AlertThreshold < 0 || c.AlertThreshold > 1 {
		bad("costs.alert_threshold", "%v is not a fraction between 0 and 1", c.AlertThreshold)
	}
	if c.DefaultMaxOutputTokens <= 0 {
		bad("costs.default_max_output_tokens", "must be positive")
	}
	if c.MaxOutputTokensCeiling < c.DefaultMaxOutputTokens {
		bad("costs.max_output_tokens_ceiling", "must be at least default_max_output_tokens (%d)", c.DefaultMaxOutputTokens)
	}
	for id, p := range c.Pricing {
		key := "costs.pricing." + id
		if _, _, ok := SplitPricingKey(id); !ok {
			bad(key, "the key must be <provider>/<model>")
		}
		if p.InputPerMTok < 0 || p.OutputPerMTok < 0 || p.CachedInputPerMTok < 0 {
			bad(key, "prices must not be negative")
		}
		if p.EffectiveDate != "" {
			if _, err := time.Parse(time.DateOnly, p.EffectiveDate); err != nil {
				bad(key+".effective_date", "%q is not a date (YYYY-MM-DD)", p.EffectiveDate)
			}
		}
	}
}

// channelModes are the receive modes of each platform ("" is the first).
var channelModes = map[string][]string{
	"telegram": {"polling", "webhook"},
	"slack":    {"events", "socket"},
	"discord":  {"gateway"},
	"whatsapp": {"web"},
}

func validateChannels(chs map[string]MessagingChannelConfig, bad func(key, format string, args ...any)) {
	ids := make([]string, 0, len(chs))
	for id := range chs {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	for _, id := range ids {
		ch, key := chs[id], "channels."+id
		typ := ch.TypeOf(id)
		modes, ok := channelModes[typ]
		if !ok {
			if ch.Type == "" {
				bad(key, "unknown channel %q: name a platform with type (%s)", id, strings.Join(MessagingTypes, ", "))
			} else {
				bad(key+".type", "unknown platform %q (use %s)", ch.Type, strings.Join(MessagingTypes, ", "))
			}
			continue
		}
		if ch.Mode != "" && !slices.Contains(modes, ch.Mode) {
			bad(key+".mode", "%q is not a %s mode (use %s)", ch.Mode, typ, strings.Join(modes, " or "))
		}
		for _, u := range []struct{ k, v string }{{"api_base_url", ch.APIBaseURL}, {"public_url", ch.PublicURL}} {
			if u.v == "" {
				continue
			}
			if p, err := url.Parse(u.v); err != nil || (p.Scheme != "http" && p.Scheme != "https") || p.Host == "" {
				bad(key+"."+u.k, "%q is not an http(s) URL", u.v)
			}
		}
	}
}

// ChannelModes are the receive modes of a platform, the default first.
func ChannelModes(typ string) []string { return channelModes[typ] }

// validateCredentials refuses an unknown provider, naming the key, and a
// cloud provider without its key URL.
func validateCredentials(c *CredentialsConfig, bad func(key, format string, args ...any)) {
	switch c.Provider {
	case "", "local":
		if c.KeyURL != "" {
			bad("credentials.key_url", "is read by the hashivault and cloud KMS providers only (credentials.provider is local)")
		}
	case "hashivault", "awskms", "gcpkms", "azurekeyvault":
		u, err := url.Parse(c.KeyURL)
		switch {
		case c.KeyURL == "":
			bad("credentials.key_url", "provider %s needs the key's URL (for example %s)", c.Provider, keyURLExample[c.Provider])
		case err != nil || u.Scheme != c.Provider:
			bad("credentials.key_url", "must be a %s:// URL (for example %s)", c.Provider, keyURLExample[c.Provider])
		}
	default:
		bad("credentials.provider", "unknown provider %q (use %s)", c.Provider, strings.Join(CredentialProviders, ", "))
	}
	if c.CacheTTL < 0 {
		bad("credentials.cache_ttl", "must not be negative")
	}
	if c.Timeout < 0 {
		bad("credentials.timeout", "must not be negative")
	}
}

var keyURLExample = map[string]string{
	"hashivault":    "hashivault://agentry",
	"awskms":        "awskms://alias/agentry?region=eu-west-1",
	"gcpkms":        "gcpkms://projects/P/locations/global/keyRings/R/cryptoKeys/agentry",
	"azurekeyvault": "azurekeyvault://myvault.vault.azure.net/keys/agentry",
}
