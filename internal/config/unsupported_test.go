package config

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// effective is every key this version acts on, with a file that reads it
// (relative to the repository root) and a string that file holds where it
// does. A key is either here or in the unsupported table; a new key that
// is neither fails TestEveryKeyIsEffectiveOrRefused.
var effective = map[string][2]string{
	"agent_dirs":                                       {"gateway/services.go", "AgentDirs"},
	"plugin_dirs":                                      {"gateway/plugins.go", "cfg.PluginDirs"},
	"plugins_config":                                   {"gateway/plugins.go", "cfg.PluginsConfig"},
	"credentials.cache_ttl":                            {"internal/secrets/provider.go", "c.CacheTTL"},
	"credentials.key_url":                              {"internal/secrets/provider.go", "c.KeyURL"},
	"credentials.provider":                             {"internal/secrets/provider.go", "c.Provider"},
	"credentials.timeout":                              {"internal/secrets/provider.go", "c.Timeout"},
	"credentials.vault_address":                        {"internal/secrets/provider.go", "c.VaultAddress"},
	"credentials.vault_token_env":                      {"internal/secrets/provider.go", "c.VaultTokenEnv"},
	"credentials.vault_token_file":                     {"internal/secrets/provider.go", "c.VaultTokenFile"},
	"auth.jwt.access_ttl":                              {"internal/auth/build.go", "AccessTTL"},
	"auth.jwt.audience":                                {"internal/auth/build.go", "JWT.Audience"},
	"auth.jwt.issuer":                                  {"internal/auth/build.go", "JWT.Issuer"},
	"auth.jwt.refresh_ttl":                             {"internal/auth/build.go", "RefreshTTL"},
	"auth.jwt.role_claim":                              {"internal/auth/build.go", "RoleClaim"},
	"auth.jwt.secret":                                  {"internal/auth/build.go", "JWT.Secret"},
	"auth.jwt.secret_env":                              {"internal/auth/build.go", "JWT.SecretEnv"},
	"auth.keys[].agents":                               {"internal/auth/build.go", "k.Agents"},
	"auth.keys[].key":                                  {"internal/auth/build.go", ".Key"},
	"auth.keys[].key_env":                              {"internal/auth/build.go", "KeyEnv"},
	"auth.keys[].role":                                 {"internal/auth/build.go", ".Role"},
	"auth.keys[].trust_user_id":                        {"internal/auth/build.go", "TrustUserID"},
	"auth.keys[].subject":                              {"internal/auth/build.go", ".Subject"},
	"auth.mode":                                        {"internal/auth/build.go", "Auth.Mode"},
	"auth.oidc.audience":                               {"internal/auth/build.go", "OIDC.Audience"},
	"auth.oidc.issuer":                                 {"internal/auth/build.go", "OIDC.Issuer"},
	"auth.oidc.jwks_url":                               {"internal/auth/build.go", "JWKSURL"},
	"channels.webhook.enabled":                         {"internal/delivery/channels.go", "base.Enabled"},
	"channels.webhook.headers":                         {"internal/delivery/channels.go", "base.Headers"},
	"channels.webhook.method":                          {"internal/delivery/channels.go", "base.Method"},
	"channels.webhook.secret":                          {"internal/delivery/channels.go", "base.Secret"},
	"channels.webhook.url":                             {"internal/delivery/channels.go", "base.URL"},
	"cli.active_context":                               {"cli/agentry/target.go", "ActiveContext"},
	"cli.contexts.<id>.api_key":                        {"cli/agentry/target.go", "APIKey"},
	"cli.contexts.<id>.gateway_url":                    {"cli/agentry/target.go", "GatewayURL"},
	"cli.gateway_url":                                  {"cli/agentry/target.go", "CLI.GatewayURL"},
	"costs.alert_threshold":                            {"internal/costs/policy.go", "AlertThreshold"},
	"costs.circuit_cooldown":                           {"internal/costs/policy.go", "CircuitCooldown"},
	"costs.circuit_failure_threshold":                  {"internal/costs/policy.go", "CircuitFailureThreshold"},
	"costs.confirmation_threshold_usd":                 {"internal/costs/policy.go", "ConfirmationThresholdUSD"},
	"costs.daily_budget_usd":                           {"internal/costs/policy.go", "DailyBudgetUSD"},
	"costs.default_max_output_tokens":                  {"internal/chat/resolve.go", "DefaultMaxOutputTokens"},
	"costs.enforcement_mode":                           {"internal/costs/policy.go", "EnforcementMode"},
	"costs.max_concurrent_per_provider":                {"internal/costs/policy.go", "MaxConcurrentPerProvider"},
	"costs.max_output_tokens_ceiling":                  {"internal/chat/resolve.go", "MaxOutputTokensCeiling"},
	"costs.monthly_budget_usd":                         {"internal/costs/policy.go", "MonthlyBudgetUSD"},
	"costs.per_agent_daily_budget_usd":                 {"internal/costs/policy.go", "PerAgentDailyBudgetUSD"},
	"costs.per_user_daily_budget_usd":                  {"internal/costs/policy.go", "PerUserDailyBudgetUSD"},
	"costs.pricing.<id>.cached_input_per_mtok":         {"internal/costs/pricing.go", "CachedInputPerMTok"},
	"costs.pricing.<id>.effective_date":                {"internal/costs/pricing.go", "EffectiveDate"},
	"costs.pricing.<id>.input_per_mtok":                {"internal/costs/pricing.go", "InputPerMTok"},
	"costs.pricing.<id>.output_per_mtok":               {"internal/costs/pricing.go", "OutputPerMTok"},
	"costs.pricing.<id>.source":                        {"internal/costs/pricing.go", ".Source"},
	"costs.pricing.<id>.version":                       {"internal/costs/pricing.go", ".Version"},
	"costs.reconciliation.enabled":                     {"gateway/services.go", "rc.Enabled"},
	"costs.reconciliation.interval":                    {"gateway/services.go", "rc.Interval"},
	"costs.reconciliation.providers.<id>.api_key_env":  {"internal/reconcile/reconcile.go", "APIKeyEnv"},
	"costs.reconciliation.providers.<id>.base_url":     {"internal/reconcile/reconcile.go", "BaseURL"},
	"costs.reconciliation.providers.<id>.organization": {"internal/reconcile/reconcile.go", "Organization"},
	"costs.reconciliation.providers.<id>.type":         {"internal/reconcile/reconcile.go", ".Type"},
	"costs.reconciliation.variance_alert_threshold":    {"internal/costs/policy.go", "VarianceAlertThreshold"},
	"costs.reservation_ttl":                            {"internal/costs/policy.go", "ReservationTTL"},
	"costs.run_budget_wait":                            {"internal/taskruns/taskruns.go", "RunBudgetWait"},
	"costs.unknown_pricing":                            {"internal/costs/policy.go", "UnknownPricing"},
	"hooks[].agents":                                   {"internal/delivery/hooks.go", "c.Agents"},
	"hooks[].on":                                       {"internal/delivery/hooks.go", "c.On"},
	"hooks[].secret_env":                               {"internal/delivery/hooks.go", "c.SecretEnv"},
	"hooks[].url":                                      {"internal/delivery/hooks.go", "c.URL"},
	"vector.backend":                                   {"gateway/vector.go", "VectorBackend()"},
	"knowledge.bases.<id>.description":                 {"internal/knowledge/service.go", "Description"},
	"knowledge.bases.<id>.sources":                     {"internal/knowledge/service.go", ".Sources"},
	"knowledge.chunking.overlap":                       {"internal/knowledge/steps.go", "Chunking.Overlap"},
	"knowledge.chunking.size":                          {"internal/knowledge/steps.go", "Chunking.Size"},
	"knowledge.embedding.batch_size":                   {"gateway/knowledge.go", "Embedding.BatchSize"},
	"knowledge.embedding.model":                        {"gateway/knowledge.go", "Embedding.Model"},
	"knowledge.embedding.provider":                     {"gateway/knowledge.go", "Embedding.Provider"},
	"knowledge.max_document_bytes":                     {"internal/knowledge/steps.go", "MaxDocumentBytes"},
	"knowledge.top_k":                                  {"internal/knowledge/search.go", "TopK"},
	"llm.allowed_models":                               {"internal/costs/policy.go", "AllowedModels"},
	"llm.allowed_providers":                            {"internal/costs/policy.go", "AllowedProviders"},
	"llm.allowed_regions":                              {"internal/costs/policy.go", "AllowedRegions"},
	"llm.cache_allowed_data_classes":                   {"internal/costs/policy.go", "CacheAllowedDataClasses"},
	"llm.default_provider":                             {"internal/chat/resolve.go", "DefaultProvider"},
	"llm.providers.<id>.allowed_data_classes":          {"internal/costs/policy.go", "AllowedDataClasses"},
	"llm.providers.<id>.api_key":                       {"gateway/llm.go", "APIKey"},
	"llm.providers.<id>.api_key_env":                   {"gateway/llm.go", "APIKeyEnv"},
	"llm.providers.<id>.api_key_secret":                {"gateway/llm.go", "APIKeySecret"},
	"llm.providers.<id>.base_url":                      {"gateway/llm.go", "pc.BaseURL"},
	"llm.providers.<id>.default_model":                 {"internal/chat/resolve.go", "DefaultModel"},
	"llm.providers.<id>.local":                         {"internal/costs/policy.go", "pc.Local"},
	"llm.providers.<id>.max_retries":                   {"gateway/llm.go", "pc.MaxRetries"},
	"llm.providers.<id>.max_tokens_per_minute":         {"internal/costs/controller.go", "MaxTokensPerMinute"},
	"llm.providers.<id>.models":                        {"internal/chat/resolve.go", ".Models"},
	"llm.providers.<id>.prompt_caching":                {"internal/costs/policy.go", "PromptCaching"},
	"llm.providers.<id>.region":                        {"internal/costs/policy.go", "pc.Region"},
	"llm.providers.<id>.timeout":                       {"gateway/llm.go", "pc.Timeout"},
	"llm.providers.<id>.type":                          {"gateway/llm.go", "pc.Type"},
	"llm.studio.max_build_cost_usd":                    {"internal/costs/policy.go", "MaxBuildCostUSD"},
	"llm.studio.max_build_tokens":                      {"internal/costs/policy.go", "MaxBuildTokens"},
	"voice.provider":                                   {"internal/voice/voice.go", "cfg.Provider"},
	"voice.model":                                      {"internal/voice/voice.go", "cfg.Model"},
	"voice.base_url":                                   {"internal/voice/voice.go", "cfg.BaseURL"},
	"voice.api_key":                                    {"internal/voice/voice.go", "cfg.APIKey"},
	"voice.api_key_env":                                {"internal/voice/voice.go", "cfg.APIKeyEnv"},
	"voice.max_session_seconds":                        {"internal/voice/voice.go", "cfg.SessionSeconds()"},
	"log.file":                                         {"internal/logging/logging.go", "cfg.File"},
	"log.format":                                       {"internal/logging/logging.go", "cfg.Format"},
	"log.level":                                        {"internal/logging/logging.go", "cfg.Level"},
	"mcp":                                              {"gateway/services.go", "cfg.MCP"},
	"package_installs.host_build_catalog":              {"gateway/packages.go", "HostBuildCatalog"},
	"fleet.rollout":                                    {"gateway/fleetconfig.go", "Fleet.Rollout"},
	"rate_limit.backend":                               {"internal/costs/controller.go", "NewRedisLimiter"},
	"rate_limit.enabled":                               {"internal/costs/controller.go", "rl.Enabled"},
	"rate_limit.per_agent_tokens_day":                  {"internal/costs/controller.go", "PerAgentTokensDay"},
	"rate_limit.per_user_rpm":                          {"internal/costs/controller.go", "PerUserRPM"},
	"rate_limit.per_user_tokens_day":                   {"internal/costs/controller.go", "PerUserTokensDay"},
	"rate_limit.redis_url":                             {"internal/costs/controller.go", "rl.RedisURL"},
	"registries[].auth_headers":                        {"cli/agentry/cmd_registry.go", "AuthHeaders"},
	"registries[].base_url":                            {"cli/agentry/cmd_registry.go", "BaseURL"},
	"registries[].id":                                  {"cli/agentry/cmd_registry.go", ".ID"},
	"registries[].priority":                            {"cli/agentry/cmd_registry.go", "Priority"},
	"registries[].signing_key":                         {"gateway/packages.go", "SigningKey"},
	"registries[].type":                                {"cli/agentry/cmd_registry.go", ".Type"},
	"runtime.action_log.enabled":                       {"internal/chat/service.go", "ActionLog.Enabled"},
	"runtime.audit_log.enabled":                        {"internal/audit/audit.go", "cfg.Enabled"},
	"runtime.audit_log.file":                           {"internal/audit/audit.go", "cfg.File"},
	"runtime.audit_log.format":                         {"internal/config/validate.go", "audit_log.format"},
	"runtime.audit_log.max_files":                      {"internal/audit/audit.go", "MaxFiles"},
	"runtime.audit_log.max_size_mb":                    {"internal/audit/audit.go", "MaxSizeMB"},
	"runtime.audit_log.path":                           {"internal/audit/audit.go", "cfg.Path"},
	"runtime.delivery.attempt_timeout":                 {"internal/delivery/message.go", "AttemptTimeout"},
	"runtime.delivery.initial_interval":                {"internal/delivery/message.go", "InitialInterval"},
	"runtime.delivery.max_interval":                    {"internal/delivery/message.go", "MaxInterval"},
	"runtime.delivery.retry_for":                       {"internal/delivery/message.go", "RetryFor"},
	"runtime.max_turns":                                {"internal/chat/resolve.go", "MaxTurns"},
	"runtime.ssrf.allow_loopback":                      {"gateway/llm.go", "AllowLoopback"},
	"runtime.ssrf.allow_private":                       {"gateway/llm.go", "AllowPrivate"},
	"runtime.ssrf.allowed_hosts":                       {"gateway/llm.go", "AllowedHosts"},
	"runtime.ssrf.enabled":                             {"gateway/llm.go", "Runtime.SSRF"},
	"runtime.tool_output_cap":                          {"gateway/services.go", "ToolOutputCap"},
	"executor.backend":                                 {"gateway/sandbox.go", "e.Backend"},
	"executor.docker.image":                            {"gateway/sandbox.go", "e.Docker.Image"},
	"executor.docker.socket":                           {"gateway/sandbox.go", "e.Docker.Socket"},
	"executor.pool.size":                               {"gateway/sandbox.go", "e.Pool.Size"},
	"executor.ssh.address":                             {"gateway/sandbox.go", "e.SSH.Address"},
	"executor.ssh.host_key":                            {"gateway/sandbox.go", "e.SSH.HostKey"},
	"executor.ssh.key_file":                            {"gateway/sandbox.go", "e.SSH.KeyFile"},
	"executor.ssh.python_path":                         {"gateway/sandbox.go", "e.SSH.PythonPath"},
	"executor.ssh.user":                                {"gateway/sandbox.go", "e.SSH.User"},
	"runtime.python_path":                              {"gateway/sandbox.go", "c.Runtime.PythonPath"},
	"runtime.sandbox.allow_unconfined":                 {"gateway/sandbox.go", "Sandbox.AllowUnconfined"},
	"runtime.sandbox.cpu_time":                         {"gateway/sandbox.go", "s.CPUTime"},
	"runtime.sandbox.file_size_mb":                     {"gateway/sandbox.go", "s.FileSizeMB"},
	"runtime.sandbox.memory_mb":                        {"gateway/sandbox.go", "s.MemoryMB"},
	"runtime.sandbox.network":                          {"gateway/sandbox.go", "s.Network"},
	"runtime.sandbox.output_bytes":                     {"gateway/sandbox.go", "s.OutputBytes"},
	"runtime.sandbox.processes":                        {"gateway/sandbox.go", "s.Processes"},
	"runtime.sandbox.wall_time":                        {"gateway/sandbox.go", "s.WallTime"},
	"runtime.system_tools":                             {"gateway/sandbox.go", "c.Runtime.SystemTools"},
	"runtime.tool_timeout":                             {"gateway/services.go", "ToolTimeout"},
	"server.adaptive_procs":                            {"cli/agentryd/root.go", "AdaptiveProcs"},
	"server.api_key":                                   {"gateway/gateway.go", "Server.APIKey"},
	"server.cors.allow_origins":                        {"api/server.go", "AllowOrigins"},
	"server.edition":                                   {"gateway/services.go", "Server.Edition"},
	"server.gc_percent":                                {"cli/agentryd/gc.go", "GCPercent"},
	"server.gui":                                       {"gateway/gateway.go", "GUIEnabled"},
	"server.host":                                      {"gateway/gateway.go", "Server.Host"},
	"server.max_body_bytes":                            {"api/server.go", "MaxBodyBytes"},
	"server.memory_limit":                              {"cli/agentryd/gc.go", "MemoryLimit"},
	"memory.hot_memory_chars":                          {"internal/memory/service.go", "HotMemoryChars"},
	"memory.file_memory_dir":                           {"internal/config/memory.go", "FileMemoryDir"},
	"memory.archive":                                   {"internal/memory/service.go", "Archive"},
	"server.port":                                      {"gateway/gateway.go", "Server.Port"},
	"server.shutdown_timeout":                          {"gateway/gateway.go", "ShutdownTimeout"},
	"server.tls.cert_file":                             {"api/server.go", "TLS.CertFile"},
	"server.tls.enabled":                               {"api/server.go", "TLS.Enabled"},
	"server.tls.key_file":                              {"api/server.go", "TLS.KeyFile"},
	"skill_dirs":                                       {"gateway/services.go", "SkillDirs"},
	"storage.backend":                                  {"gateway/gateway.go", "Storage.Backend"},
	"storage.commit_linger":                            {"gateway/gateway.go", "CommitLinger"},
	"storage.sqlite.durability":                        {"gateway/gateway.go", "cfg.Durability()"},
	"storage.dsn":                                      {"gateway/gateway.go", "Storage.DSN"},
	"storage.max_open_conns":                           {"gateway/gateway.go", "MaxOpenConns"},
	"storage.write_queue":                              {"gateway/gateway.go", "WriteQueue"},
	"telemetry.capture_content":                        {"internal/telemetry/telemetry.go", "CaptureContent"},
	"telemetry.endpoint":                               {"internal/telemetry/telemetry.go", "Endpoint"},
	"telemetry.exporter":                               {"internal/telemetry/telemetry.go", "Exporter"},
	"telemetry.headers":                                {"internal/telemetry/telemetry.go", "Headers"},
	"telemetry.metrics.enabled":                        {"api/observe.go", "Metrics.Enabled"},
	"telemetry.metrics.listen":                         {"gateway/telemetry.go", "Metrics.Listen"},
	"telemetry.metrics.pprof":                          {"gateway/telemetry.go", "Pprof"},
	"telemetry.metrics.public":                         {"api/observe.go", "Metrics.Public"},
	"telemetry.otlp_endpoint":                          {"internal/telemetry/telemetry.go", "OTLPEndpoint"},
	"telemetry.sample_ratio":                           {"internal/telemetry/telemetry.go", "SampleRatio"},
	"telemetry.service_name":                           {"internal/telemetry/telemetry.go", "ServiceName"},
	"temporal.address":                                 {"gateway/gateway.go", "Temporal.Address"},
	"temporal.api_key":                                 {"internal/temporalconn/dial.go", "APIKey"},
	"temporal.embedded.frontend_port":                  {"internal/temporalserver/options.go", "FrontendPort"},
	"temporal.embedded.host":                           {"internal/temporalserver/options.go", "Host"},
	"temporal.embedded.ui_enabled":                     {"internal/temporalserver/options.go", "UIEnabled"},
	"temporal.embedded.ui_port":                        {"internal/temporalserver/options.go", "UIPort"},
	"temporal.namespace":                               {"internal/temporalconn/dial.go", "Namespace"},
	"temporal.task_queue":                              {"gateway/services.go", "TaskQueue"},
	"temporal.tls.ca_file":                             {"internal/temporalconn/dial.go", "CAFile"},
	"temporal.tls.cert_file":                           {"internal/temporalconn/dial.go", "CertFile"},
	"temporal.tls.enabled":                             {"internal/temporalconn/dial.go", "TLS.Enabled"},
	"temporal.tls.key_file":                            {"internal/temporalconn/dial.go", "KeyFile"},
	"temporal.tls.server_name":                         {"internal/temporalconn/dial.go", "ServerName"},
	"temporal.ui_url":                                  {"internal/console/web/js/taskpanel.js", "t.ui_url"},
	"temporal.worker.enabled":                          {"gateway/gateway.go", "Worker.Enabled"},
	"updates.manifest_url":                             {"cli/agentry/cmd_update.go", "ManifestURL"},
	"workboard.enabled":                                {"gateway/features.go", "Workboard.Enabled"},
}

// TestEveryKeyIsEffectiveOrRefused walks every key of the configuration
// (issue 43): each is read where `effective` says, or refused when set by
// the unsupported table.
func TestEveryKeyIsEffectiveOrRefused(t *testing.T) {
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	refused := UnsupportedKeys()
	keys := leafKeys()
	for _, key := range keys {
		where, ok := effective[key]
		switch {
		case slices.Contains(refused, key):
			if ok {
				t.Errorf("%s is both effective and refused", key)
			}
		case !ok:
			t.Errorf("%s is neither effective (say where it is read in `effective`) nor refused (unsupported.go)", key)
		default:
			data, err := os.ReadFile(filepath.Join(root, where[0]))
			if err != nil {
				t.Errorf("%s: %v", key, err)
			} else if !strings.Contains(string(data), where[1]) {
				t.Errorf("%s: %s does not hold %q (where it was read); update `effective`", key, where[0], where[1])
			}
		}
	}
	for key := range effective {
		if !slices.Contains(keys, key) {
			t.Errorf("effective lists %s, which is not a key", key)
		}
	}
}

// setUnsupported sets each key of the unsupported table to a value this
// version would ignore.
var setUnsupported = map[string]func(c *Config){
	"runtime.max_sessions":           func(c *Config) { c.Runtime.MaxSessions = 5 },
	"memory.vector":                  func(c *Config) { c.Memory.Vector = true },
	"queue":                          func(c *Config) { c.Queue = map[string]any{"type": "nats"} },
	"storage.backend: external":      func(c *Config) { c.Storage.Backend = "external" },
	"server.tls.ca_file":             func(c *Config) { c.Server.TLS.CAFile = "ca.pem" },
	"server.tls.server_name":         func(c *Config) { c.Server.TLS.ServerName = "gw.example" },
	"llm.providers.ollama.retention": func(c *Config) { p := c.LLM.Providers["ollama"]; p.Retention = "30d"; c.LLM.Providers["ollama"] = p },
}

func TestUnsupportedKeysAreRefusedOneByOne(t *testing.T) {
	base := Defaults()
	if err := Validate(&base); err != nil {
		t.Fatalf("the defaults are refused: %v", err)
	}
	if len(setUnsupported) != len(unsupported) {
		t.Errorf("%d rows in the unsupported table, %d tested here", len(unsupported), len(setUnsupported))
	}
	for key, set := range setUnsupported {
		c := Defaults()
		set(&c)
		err := Validate(&c)
		if err == nil || !strings.Contains(err.Error(), "not supported yet: "+key+" (") {
			t.Errorf("%s: want one line naming it as not supported yet, got %v", key, err)
		}
		if err != nil && strings.Contains(err.Error(), "\n") {
			t.Errorf("%s: the error is not one line: %q", key, err)
		}
	}
}

// A file mixing supported and unsupported keys is refused with one error
// naming every unsupported key, environment overrides included.
func TestMixedConfigNamesEveryUnsupportedKeyInOneError(t *testing.T) {
	dir := t.TempDir()
	path := write(t, filepath.Join(dir, "c.yaml"), `server: {port: 19001}
runtime:
  max_turns: 4
memory: {vector: true}
channels:
  webhook: {enabled: false}
  slack: {bot_token: xoxb}
queue: {type: nats}
log: {level: debug}
`)
	_, err := Load(context.Background(), MapEnv(map[string]string{EnvWorkspace: dir, EnvConfigPath: path,
		"AGENTRY_RUNTIME_MAX_SESSIONS": "5"}))
	if err == nil {
		t.Fatal("a configuration with unsupported keys loaded")
	}
	want := "not supported yet: runtime.max_sessions, memory.vector, queue ("
	if !strings.Contains(err.Error(), want) || strings.Count(err.Error(), "not supported yet") != 1 {
		t.Fatalf("want one error %q..., got %v", want, err)
	}
}
