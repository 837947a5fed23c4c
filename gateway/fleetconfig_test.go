package gateway

import (
	"errors"
	"strings"
	"testing"

	"github.com/agentryhq/agentry/dev/testenv"
	"github.com/agentryhq/agentry/internal/config"
)

// Processes sharing one PostgreSQL with the same fleet-wide settings all
// start; one whose budget and task queue differ is refused with an error
// naming those keys (never their values); fleet.rollout admits it, and its
// configuration is then the fleet's: a process with the old one is refused.
// Once every process has stopped, any configuration starts.
func TestFleetConfigMismatchRefusedAcrossTwoServiceSets(t *testing.T) {
	dsn := testenv.Postgres(t)
	if dsn == "" {
		t.Skip("PostgreSQL not available")
	}
	base := map[string]string{
		"AGENTRY_STORAGE_BACKEND":        "postgres",
		"AGENTRY_STORAGE_DSN":            dsn,
		"AGENTRY_COSTS_DAILY_BUDGET_USD": "10",
		"AGENTRY_SERVER_API_KEY":         "fleet-key-0123456789abcdef",
	}
	with := func(kv ...string) map[string]string {
		env := map[string]string{}
		for k, v := range base {
			env[k] = v
		}
		for i := 0; i+1 < len(kv); i += 2 {
			env[kv[i]] = kv[i+1]
		}
		return env
	}
	a := testServicesEnv(t, base)
	b := testServicesEnv(t, with("AGENTRY_SERVER_API_KEY", "another-key-0123456789abcdef")) // secrets are not compared

	_, err := tryServicesEnv(t, with("AGENTRY_COSTS_DAILY_BUDGET_USD", "99.5", "AGENTRY_TEMPORAL_TASK_QUEUE", "other-queue"))
	var fe *FleetConfigError
	if !errors.As(err, &fe) {
		t.Fatalf("differing configuration started: err = %v", err)
	}
	if got := strings.Join(fe.Keys, ","); got != "costs.daily_budget_usd,temporal.task_queue" {
		t.Errorf("differing keys = %q", got)
	}
	msg := err.Error()
	for _, want := range []string{"costs.daily_budget_usd", "temporal.task_queue", "AGENTRY_FLEET_ROLLOUT"} {
		if !strings.Contains(msg, want) {
			t.Errorf("error %q does not name %s", msg, want)
		}
	}
	for _, never := range []string{"99.5", "other-queue", "fleet-key", "another-key"} {
		if strings.Contains(msg, never) {
			t.Errorf("error %q shows a value (%s)", msg, never)
		}
	}

	// Rolled out on purpose: admitted, and now the newest configuration.
	newer := with("AGENTRY_COSTS_DAILY_BUDGET_USD", "20", "AGENTRY_FLEET_ROLLOUT", "true")
	c := testServicesEnv(t, newer)
	d, err := tryServicesEnv(t, with("AGENTRY_COSTS_DAILY_BUDGET_USD", "20"))
	if err != nil {
		t.Fatalf("a process with the rolled-out configuration: %v", err)
	}
	if _, err := tryServicesEnv(t, base); !errors.As(err, &fe) || strings.Join(fe.Keys, ",") != "costs.daily_budget_usd" {
		t.Fatalf("a process with the old configuration after the rollout: err = %v, want refused on costs.daily_budget_usd", err)
	}

	// Everyone gone (clean stops remove their rows): a new configuration starts.
	a.Stop()
	b.Stop()
	c.Stop()
	d.Stop()
	if _, err := tryServicesEnv(t, with("AGENTRY_COSTS_DAILY_BUDGET_USD", "30")); err != nil {
		t.Fatalf("first process of a new fleet: %v", err)
	}
}

// On SQLite one process owns the file, under the stable holder id local: a
// restart with another configuration while the old row stands (a crash
// removes nothing) starts, taking its own row over.
func TestFleetConfigOnSQLiteIsOneProcess(t *testing.T) {
	env := map[string]string{config.EnvWorkspace: t.TempDir()}
	testServicesEnv(t, env)
	env["AGENTRY_COSTS_DAILY_BUDGET_USD"] = "42"
	if _, err := tryServicesEnv(t, env); err != nil {
		t.Fatalf("restart on the same SQLite file with another budget: %v", err)
	}
}

// The fingerprint holds no secret value.
func TestFleetFingerprintHasNoSecrets(t *testing.T) {
	s := testServicesEnv(t, map[string]string{"AGENTRY_AUTH_JWT_SECRET": "jwt-secret-value"})
	for k := range fleetSettings(&s.gw.Config.Config) {
		if strings.Contains(k, "secret") || strings.Contains(k, "api_key") {
			t.Errorf("fleet setting %s is a secret", k)
		}
	}
}
