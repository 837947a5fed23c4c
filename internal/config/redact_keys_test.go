package config

import "testing"

// shownInGetConfig is every key of the configuration and whether GET
// /config shows its value (issue 43): secrets (token, secret, password,
// api_key, credential as a credential; key, dsn, redis_url; header values)
// are hidden, the numeric limits whose names say "tokens" are shown.
var shownInGetConfig = map[string]bool{
	"agent_dirs":                                       true,
	"auth.jwt.access_ttl":                              true,
	"auth.jwt.audience":                                true,
	"auth.jwt.issuer":                                  true,
	"auth.jwt.refresh_ttl":                             true,
	"auth.jwt.role_claim":                              true,
	"auth.jwt.secret":                                  false,
	"auth.jwt.secret_env":                              true,
	"auth.keys[].key":                                  false,
	"auth.keys[].key_env":                              true,
	"auth.keys[].role":                                 true,
	"auth.keys[].trust_user_id":                        true,
	"auth.keys[].subject":                              true,
	"auth.mode":                                        true,
	"auth.oidc.audience":                               true,
	"auth.oidc.issuer":                                 true,
	"auth.oidc.jwks_url":                               true,
	"channels.webhook.enabled":                         true,
	"channels.webhook.headers":                         false,
	"channels.webhook.method":                          true,
	"channels.webhook.secret":                          false,
	"channels.webhook.url":                             true,
	"cli.active_context":                               true,
	"cli.contexts.<id>.api_key":                        false,
	"cli.contexts.<id>.gateway_url":                    true,
	"cli.gateway_url":                                  true,
	"costs.alert_threshold":                            true,
	"costs.circuit_cooldown":                           true,
	"costs.circuit_failure_threshold":                  true,
	"costs.confirmation_threshold_usd":                 true,
	"costs.daily_budget_usd":                           true,
	"costs.default_max_output_tokens":                  true,
	"costs.enforcement_mode":                           true,
	"costs.max_concurrent_per_provider":                true,
	"costs.max_output_tokens_ceiling":                  true,
	"costs.monthly_budget_usd":                         true,
	"costs.per_agent_daily_budget_usd":                 true,
	"costs.per_user_daily_budget_usd":                  true,
	"costs.pricing.<id>.cached_input_per_mtok":         true,
	"costs.pricing.<id>.effective_date":                true,
	"costs.pricing.<id>.input_per_mtok":                true,
	"costs.pricing.<id>.output_per_mtok":               true,
	"costs.pricing.<id>.source":                        true,
	"costs.pricing.<id>.version":                       true,
	"costs.reconciliation.enabled":                     true,
	"costs.reconciliation.interval":                    true,
	"costs.reconciliation.providers.<id>.api_key_env":  true,
	"costs.reconciliation.providers.<id>.base_url":     true,
	"costs.reconciliation.providers.<id>.organization": true,
	"costs.reconciliation.providers.<id>.type":         true,
	"costs.reconciliation.variance_alert_threshold":    true,
	"costs.reservation_ttl":                            true,
	"costs.run_budget_wait":                            true,
	"costs.unknown_pricing":                            true,
	"credentials.provider":                             true,
	"hooks[].agents":                                   true,
	"hooks[].on":                                       true,
	"hooks[].secret_env":                               true,
	"hooks[].url":                                      true,
	"knowledge":                                        true,
	"llm.allowed_models":                               true,
	"llm.allowed_providers":                            true,
	"llm.allowed_regions":                              true,
	"llm.cache_allowed_data_classes":                   true,
	"llm.default_provider":                             true,
	"llm.providers.<id>.allowed_data_classes":          true,
	"llm.providers.<id>.api_key":                       false,
	"llm.providers.<id>.api_key_env":                   true,
	"llm.providers.<id>.base_url":                      true,
	"llm.providers.<id>.default_model":                 true,
	"llm.providers.<id>.local":                         true,
	"llm.providers.<id>.max_retries":                   true,
	"llm.providers.<id>.max_tokens_per_minute":         true,
	"llm.providers.<id>.models":                        true,
	"llm.providers.<id>.prompt_caching":                true,
	"llm.providers.<id>.region":                        true,
	"llm.providers.<id>.retention":                     true,
	"llm.providers.<id>.timeout":                       true,
	"llm.providers.<id>.type":                          true,
	"llm.studio.max_build_cost_usd":                    true,
	"llm.studio.max_build_tokens":                      true,
	"log.file":                                         true,
	"log.format":                                       true,
	"log.level":                                        true,
	"mcp":                                              true,
	"memory":                                           true,
	"package_installs.host_build_catalog":              true,
	"plugin_dirs":                                      true,
	"plugins_config":                                   true,
	"queue":                                            true,
	"rate_limit.backend":                               true,
	"rate_limit.enabled":                               true,
	"rate_limit.per_agent_tokens_day":                  true,
	"rate_limit.per_user_rpm":                          true,
	"rate_limit.per_user_tokens_day":                   true,
	"rate_limit.redis_url":                             false,
	"registries[].auth_headers":                        false,
	"registries[].base_url":                            true,
	"registries[].id":                                  true,
	"registries[].priority":                            true,
	"registries[].signing_key":                         true,
	"registries[].type":                                true,
	"runtime.action_log.enabled":                       true,
	"runtime.audit_log.enabled":                        true,
	"runtime.audit_log.file":                           true,
	"runtime.audit_log.format":                         true,
	"runtime.audit_log.max_files":                      true,
	"runtime.audit_log.max_size_mb":                    true,
	"runtime.audit_log.path":                           true,
	"runtime.delivery.attempt_timeout":                 true,
	"runtime.delivery.initial_interval":                true,
	"runtime.delivery.max_interval":                    true,
	"runtime.delivery.retry_for":                       true,
	"runtime.max_sessions":                             true,
	"runtime.max_turns":                                true,
	"runtime.python_path":                              true,
	"runtime.ssrf.allow_loopback":                      true,
	"runtime.ssrf.allow_private":                       true,
	"runtime.ssrf.allowed_hosts":                       true,
	"runtime.ssrf.enabled":                             true,
	"runtime.system_tools":                             true,
	"runtime.tool_output_cap":                          true,
	"executor.backend":                                 true,
	"executor.docker.image":                            true,
	"executor.docker.socket":                           true,
	"executor.pool.size":                               true,
	"executor.ssh.address":                             true,
	"executor.ssh.host_key":                            true,
	"executor.ssh.key_file":                            true,
	"executor.ssh.python_path":                         true,
	"executor.ssh.user":                                true,
	"runtime.sandbox.allow_unconfined":                 true,
	"runtime.sandbox.cpu_time":                         true,
	"runtime.sandbox.file_size_mb":                     true,
	"runtime.sandbox.memory_mb":                        true,
	"runtime.sandbox.network":                          true,
	"runtime.sandbox.output_bytes":                     true,
	"runtime.sandbox.processes":                        true,
	"runtime.sandbox.wall_time":                        true,
	"runtime.tool_timeout":                             true,
	"server.adaptive_procs":                            true,
	"server.api_key":                                   false,
	"server.cors.allow_origins":                        true,
	"server.edition":                                   true,
	"server.gc_percent":                                true,
	"server.gui":                                       true,
	"server.host":                                      true,
	"server.max_body_bytes":                            true,
	"server.memory_limit":                              true,
	"server.port":                                      true,
	"server.shutdown_timeout":                          true,
	"server.tls.ca_file":                               true,
	"server.tls.cert_file":                             true,
	"server.tls.enabled":                               true,
	"server.tls.key_file":                              true,
	"server.tls.server_name":                           true,
	"skill_dirs":                                       true,
	"storage.backend":                                  true,
	"storage.commit_linger":                            true,
	"storage.sqlite.durability":                        true,
	"storage.dsn":                                      false,
	"storage.max_open_conns":                           true,
	"storage.write_queue":                              true,
	"telemetry.capture_content":                        true,
	"telemetry.endpoint":                               true,
	"telemetry.exporter":                               true,
	"telemetry.headers":                                false,
	"telemetry.metrics.enabled":                        true,
	"telemetry.metrics.listen":                         true,
	"telemetry.metrics.pprof":                          true,
	"telemetry.metrics.public":                         true,
	"telemetry.otlp_endpoint":                          true,
	"telemetry.sample_ratio":                           true,
	"telemetry.service_name":                           true,
	"temporal.address":                                 true,
	"temporal.api_key":                                 false,
	"temporal.embedded.frontend_port":                  true,
	"temporal.embedded.host":                           true,
	"temporal.embedded.ui_enabled":                     true,
	"temporal.embedded.ui_port":                        true,
	"temporal.namespace":                               true,
	"temporal.task_queue":                              true,
	"temporal.tls.ca_file":                             true,
	"temporal.tls.cert_file":                           true,
	"temporal.tls.enabled":                             true,
	"temporal.tls.key_file":                            true,
	"temporal.tls.server_name":                         true,
	"temporal.ui_url":                                  true,
	"temporal.worker.enabled":                          true,
	"updates.manifest_url":                             true,
	"vector":                                           true,
	"voice":                                            true,
	"workboard.enabled":                                true,
}

func TestGetConfigShowsLimitsAndHidesSecrets(t *testing.T) {
	c := filledConfig()
	tree, err := c.RedactedTree()
	if err != nil {
		t.Fatal(err)
	}
	keys := leafKeys()
	free := map[string]bool{}
	for _, k := range keys {
		free[k] = true
	}
	flat := map[string]any{}
	flattenKeys(tree, "", free, flat)
	for _, k := range keys {
		want, listed := shownInGetConfig[k]
		if !listed {
			t.Errorf("%s: say in shownInGetConfig whether GET /config shows it", k)
			continue
		}
		if got := visible(k, flat[k]); got != want {
			t.Errorf("%s: shown %v, want %v (value %v)", k, got, want, flat[k])
		}
	}
	if len(shownInGetConfig) != len(keys) {
		t.Errorf("shownInGetConfig lists %d keys, the configuration has %d", len(shownInGetConfig), len(keys))
	}
	// The limits the issue names, by value.
	for key, v := range map[string]any{"costs.max_output_tokens_ceiling": 7, "costs.default_max_output_tokens": 7,
		"llm.providers.<id>.max_tokens_per_minute": 7, "rate_limit.per_user_tokens_day": 7,
		"rate_limit.per_agent_tokens_day": 7, "llm.studio.max_build_tokens": 7} {
		if flat[key] != v {
			t.Errorf("%s = %v, want %v", key, flat[key], v)
		}
	}
	// A string under a "tokens" key is not a limit; "token" alone is a credential.
	for k, v := range map[string]any{"refresh_tokens": "rt-1", "bot_token": 12345, "max_tokens_secret": 3} {
		if got := Redact(map[string]any{k: v}).(map[string]any)[k]; got != Redacted {
			t.Errorf("%s: %v shown", k, got)
		}
	}
}
