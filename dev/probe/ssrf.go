package probe

import (
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"time"

	"github.com/agentryhq/agentry/dev/fakellm"
	"github.com/agentryhq/agentry/internal/netguard"
	"github.com/agentryhq/agentry/internal/netguard/ssrftest"
)

// ssrfCheck is one SSRF form asked of the http_get tool through a
// scripted tool call.
type ssrfCheck struct {
	cue, callID, url string
}

// scriptSSRF makes the fake answer "SSRFPROBE n" with an http_get call of
// the n-th SSRF form.
func scriptSSRF(fake *fakellm.Server) []ssrfCheck {
	var checks []ssrfCheck
	var rules []fakellm.Rule
	for i, u := range ssrfForms {
		ch := ssrfCheck{cue: fmt.Sprintf("SSRFPROBE %d.", i), callID: fmt.Sprintf("call_ssrf_%d", i), url: u}
		checks = append(checks, ch)
		tc := fakellm.NewToolCall("http_get", map[string]string{"url": u})
		tc.ID = ch.callID
		rules = append(rules, fakellm.Rule{Contains: ch.cue, Times: 1, ToolCalls: []fakellm.ToolCall{tc}})
	}
	fake.AddRules(rules...)
	return checks
}

// checkHTTPGetSSRF chats each cue and reads the tool result the gateway
// sent back to the provider: it must say the destination was refused.
func checkHTTPGetSSRF(c *client, fake *fakellm.Server, checks []ssrfCheck, rep *BadInput) (checked, fetched int) {
	for _, ch := range checks {
		a := c.call("POST", "/api/v1/chat", map[string]any{"agent_id": "probe", "text": ch.cue})
		if a.Status != 200 {
			rep.Examples = append(rep.Examples, fmt.Sprintf("http_get SSRF chat %s: %d %.200s", ch.url, a.Status, a.Raw))
			continue
		}
		result, found := toolResult(fake, ch.callID)
		if !found {
			rep.Examples = append(rep.Examples, fmt.Sprintf("http_get SSRF %s: no tool result reached the provider", ch.url))
			continue
		}
		checked++
		if !strings.Contains(result, "not allowed") {
			fetched++
			rep.Examples = append(rep.Examples, fmt.Sprintf("http_get fetched SSRF form %s: %.200s", ch.url, result))
		}
	}
	return checked, fetched
}

// toolResult finds the content of the tool message answering callID in
// the requests the provider received.
func toolResult(fake *fakellm.Server, callID string) (string, bool) {
	for _, call := range fake.Calls() {
		var body struct {
			Messages []struct {
				Role       string `json:"role"`
				ToolCallID string `json:"tool_call_id"`
				Content    any    `json:"content"`
			} `json:"messages"`
		}
		if json.Unmarshal(call.Body, &body) != nil {
			continue
		}
		for _, m := range body.Messages {
			if m.Role == "tool" && m.ToolCallID == callID {
				return fmt.Sprint(m.Content), true
			}
		}
	}
	return "", false
}

// PackageInstallSSRF is the package-install part of the SSRF check
// (issue 42): every form of ssrftest (with the trap's port) as an http://
// and https:// source of POST /package-installs, and redirects to the
// forms from the allowed host 127.0.0.1. A trap listens on every local
// address of its port; outside a network namespace only the loopback and
// unspecified spellings can reach it, the others are counted as refused
// only when the gateway says so.
type PackageInstallSSRF struct {
	Checked int `json:"checked"`
	// Must be 0: connections the trap got, and sources neither refused
	// with 403 nor failed by the SSRF policy.
	Dialed     int `json:"trap_connections"`
	NotRefused int `json:"not_refused"`
	// Skipped are the spellings of 127.0.0.1, which the probe's
	// allowed_hosts allows on purpose (the hook receiver), and the
	// .trap.test names, which resolve only inside the e2e test's network
	// namespace.
	Skipped  int      `json:"skipped_allowed"`
	Examples []string `json:"examples,omitempty"`
}

// checkPackageInstallSSRF runs the package-install SSRF check.
func checkPackageInstallSSRF(c *client, logf func(string, ...any)) (*PackageInstallSSRF, error) {
	rep := &PackageInstallSSRF{}
	trap, err := ssrftest.Listen("[::]:0")
	if err != nil {
		return nil, err
	}
	defer trap.Close()
	port := trap.Addr().(*net.TCPAddr).Port
	usable := func(all []ssrftest.Form) []ssrftest.Form {
		var out []ssrftest.Form
		for _, f := range all {
			_, namespaceOnly := ssrftest.Hosts[f.Host]
			if ip := netguard.ParseIP(f.Host); namespaceOnly || ip != nil && ip.Equal(net.IPv4(127, 0, 0, 1)) {
				rep.Skipped++
				continue
			}
			out = append(out, f)
		}
		return out
	}
	forms := usable(ssrftest.Forms())
	// The redirector is on 127.0.0.1, which allowed_hosts allows.
	targets := usable(ssrftest.RedirectTargets())
	redirector := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		parts := strings.SplitN(strings.TrimPrefix(r.URL.Path, "/r/"), "/", 2)
		n, err := strconv.Atoi(parts[0])
		if err != nil || n < 0 || n >= len(targets) || len(parts) < 2 {
			http.NotFound(w, r)
			return
		}
		http.Redirect(w, r, ssrftest.URL("http", targets[n], port, "/"+parts[1]+"?"+r.URL.RawQuery), http.StatusFound)
	}))
	defer redirector.Close()
	var sources []string
	for _, f := range forms {
		sources = append(sources, ssrftest.URL("http", f, port, "/x.git"), ssrftest.URL("https", f, port, "/x.git"))
	}
	for i := range targets {
		sources = append(sources, fmt.Sprintf("%s/r/%d/x.git", redirector.URL, i))
	}
	const refusedBy = "refused by the SSRF policy"
	example := func(format string, args ...any) {
		rep.NotRefused++
		if len(rep.Examples) < 10 {
			rep.Examples = append(rep.Examples, fmt.Sprintf(format, args...))
		}
	}
	jobs := map[string]string{}
	for _, src := range sources {
		rep.Checked++
		a := c.call("POST", "/api/v1/package-installs", map[string]any{"source": src, "allow_unverified": true})
		msg, _ := a.JSON["error"].(string)
		switch {
		case a.Status == 403 && strings.Contains(msg, refusedBy):
		case a.Status == 202 && a.id("id") != "":
			jobs[a.id("id")] = src
		default:
			example("package install %s: %d %.200s", src, a.Status, a.Raw)
		}
	}
	logf("package-install SSRF: %d sources, %d jobs to follow", len(sources), len(jobs))
	deadline := time.Now().Add(90 * time.Second)
	for len(jobs) > 0 && time.Now().Before(deadline) {
		for id, src := range jobs {
			a := c.call("GET", "/api/v1/package-installs/"+id, nil)
			status, _ := a.JSON["status"].(string)
			if status != "failed" && status != "succeeded" {
				continue
			}
			delete(jobs, id)
			if msg, _ := a.JSON["error"].(string); status != "failed" || !strings.Contains(msg, refusedBy) {
				example("package install job for %s: %s %.200s", src, status, msg)
			}
		}
		time.Sleep(300 * time.Millisecond)
	}
	for id, src := range jobs {
		example("package install job %s for %s did not end in 90 s", id, src)
	}
	rep.Dialed = int(trap.Connections())
	for _, s := range trap.Seen() {
		if len(rep.Examples) < 20 {
			rep.Examples = append(rep.Examples, "the trap got "+s)
		}
	}
	return rep, nil
}
