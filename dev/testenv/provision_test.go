package testenv

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// provision runs dev/provision.sh with a command that prints what the test
// binaries would be handed, with the environment given (and CI cleared).
func provision(t *testing.T, env ...string) (string, error) {
	t.Helper()
	script, err := filepath.Abs("../provision.sh")
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("bash", script, "sh", "-c", `echo "WITHOUT=$AGENTRY_TEST_WITHOUT PG=$AGENTRY_TEST_POSTGRES_DSN REDIS=$AGENTRY_TEST_REDIS_URL"`)
	for _, kv := range os.Environ() {
		switch k, _, _ := strings.Cut(kv, "="); k {
		case "CI", EnvRequireServices, EnvWithout, EnvPostgresDSN, EnvRedisURL, "AGENTRY_CI_SHARED_SERVICES":
		default:
			cmd.Env = append(cmd.Env, kv)
		}
	}
	cmd.Env = append(cmd.Env, env...)
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// The one provisioning script (issue 18 item 13): on a machine without a
// service `make test` goes on and says loudly what it skips; in CI the same
// gap fails the run; the services it starts are handed to the tests.
func TestProvisionScript(t *testing.T) {
	if testing.Short() {
		t.Skip("starts servers")
	}
	out, err := provision(t, EnvWithout+"=postgres,redis,chromium")
	if err != nil {
		t.Fatalf("a machine without services must still run the suite: %v\n%s", err, out)
	}
	for _, want := range []string{"SKIPPED for lack of a service", "PostgreSQL: AGENTRY_TEST_WITHOUT", "redis-server: AGENTRY_TEST_WITHOUT", "WITHOUT=postgres,redis,chromium", "PG= REDIS=\n"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}

	out, err = provision(t, EnvWithout+"=redis", EnvRequireServices+"=1")
	if err == nil || !strings.Contains(out, "redis-server is required") {
		t.Errorf("strict mode must fail for a missing service: %v\n%s", err, out)
	}

	if _, err := exec.LookPath("redis-server"); err != nil {
		t.Skip("redis-server not installed: the started-services half needs it")
	}
	out, err = provision(t, EnvWithout+"=postgres")
	if err != nil || !strings.Contains(out, "REDIS=redis://127.0.0.1:") {
		t.Errorf("the started Redis must be handed over: %v\n%s", err, out)
	}
}
