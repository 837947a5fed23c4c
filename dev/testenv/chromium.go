package testenv

import (
	"fmt"
	"os"
	"os/exec"
	"testing"
)

// EnvChromium names the Chromium (or Chrome) binary for browser tests;
// default: the first of chromium, chromium-browser, google-chrome on PATH.
const EnvChromium = "AGENTRY_TEST_CHROMIUM"

// Chromium returns the path of a headless-capable Chromium for browser
// tests. Without one the test is skipped loudly, or fails where services
// are required (dev/provision.sh installs Debian's chromium package when root).
func Chromium(t testing.TB) string {
	t.Helper()
	if p := os.Getenv(EnvChromium); p != "" {
		if _, err := os.Stat(p); err != nil {
			t.Fatalf("testenv: %s=%s: %v", EnvChromium, p, err)
		}
		return p
	}
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	reason := "no chromium, chromium-browser or google-chrome on PATH (install Debian's package: apt-get install -y --no-install-recommends chromium)"
	if !requireServices() {
		fmt.Fprintf(os.Stderr, "\n!!!!!!!! BROWSER TESTS SKIPPED: %s !!!!!!!!\n\n", reason)
	}
	reportUnavailable(t, "Chromium", &unavailableError{reason: reason})
	return ""
}
