// Package probe checks the gateway binary from the outside, as the
// independent probe of issue 18 did: thousands of bad requests against
// every /api/v1 route family and the inbound webhook, secrets planted
// everywhere the gateway knows one and echoed back by a provider, and
// SIGKILL while work that promises a workflow is in flight. It reports the
// figures that must be 0 (5xx on bad input, answers outside the error
// envelope, hangs, secrets found, orphaned records) beside what it saw.
// `go run ./dev/cmd/probe` is the command; docs/probe.md explains it.
package probe

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/agentryhq/agentry/dev/fakellm"
	"github.com/agentryhq/agentry/dev/gatewaytest"
)

// Options shape a probe run.
type Options struct {
	// Binary is the agentryd to probe.
	Binary string
	// Requests is the number of bad requests (default 5000).
	Requests int
	// Kills is the number of SIGKILLs (default 10; 0 skips that part).
	Kills int
	// Seed makes a run reproducible (the requests, the kill moments, the
	// planted values).
	Seed uint64
	// Timeout is how long one request may take before it counts as a hang
	// (default 10 s).
	Timeout time.Duration
	// Workers send the bad requests concurrently (default 4).
	Workers int
	// Dir holds the workspace; default a temp dir, removed at the end.
	Dir string
	// Log receives progress lines; nil discards them.
	Log io.Writer
}

// Report is what a run found.
type Report struct {
	Seed        uint64     `json:"seed"`
	Binary      string     `json:"binary"`
	WallSeconds float64    `json:"wall_seconds"`
	BadInput    *BadInput  `json:"bad_input"`
	Secrets     *Secrets   `json:"secrets"`
	Crash       *Crash     `json:"crash,omitempty"`
	Hardening   *Hardening `json:"hardening"`
	// PackageSSRF is the package-install SSRF check (issue 42).
	PackageSSRF *PackageInstallSSRF `json:"package_install_ssrf,omitempty"`
	// Failures names every must-be-0 figure that was not 0.
	Failures []string `json:"failures"`
}

// OK reports whether every must-be-0 figure is 0.
func (r *Report) OK() bool { return len(r.Failures) == 0 }

// Run probes opts.Binary and reports. An error means the probe could not
// do its work (the gateway did not start); defects are in the report.
func Run(opts Options) (*Report, error) {
	if opts.Requests == 0 {
		opts.Requests = 5000
	}
	if opts.Timeout == 0 {
		opts.Timeout = 10 * time.Second
	}
	if opts.Workers == 0 {
		opts.Workers = 4
	}
	began := time.Now()
	logf := func(format string, args ...any) {
		if opts.Log != nil {
			fmt.Fprintf(opts.Log, "probe %5.1fs: "+format+"\n", append([]any{time.Since(began).Seconds()}, args...)...)
		}
	}
	dir := opts.Dir
	if dir == "" {
		d, err := os.MkdirTemp("", "agentry-probe-")
		if err != nil {
			return nil, err
		}
		defer os.RemoveAll(d)
		dir = d
	}
	secrets := plant(opts.Seed)
	fake := fakellm.New()
	if err := fake.Start("127.0.0.1:0"); err != nil {
		return nil, err
	}
	defer fake.Close()
	scriptLeak(fake, secrets)
	ssrfChecks := scriptSSRF(fake)
	sink, err := gatewaytest.NewHookSink()
	if err != nil {
		return nil, err
	}
	defer sink.Close()
	g, err := newGatewayProc(opts.Binary, dir, fake, sink, secrets)
	if err != nil {
		return nil, err
	}
	logf("starting %s on %s (workspace %s)", opts.Binary, g.base, g.ws)
	if err := g.start(); err != nil {
		return nil, err
	}
	defer g.stop()
	c := newClient(g.base, secrets.AdminKey, opts.Timeout)
	rep := &Report{Seed: opts.Seed, Binary: opts.Binary}

	// 1. Bad input, between a snapshot of the state and a comparison.
	before, err := snapshot(c)
	if err != nil {
		return nil, err
	}
	reqs := generate(opts.Seed, opts.Requests, secrets.AdminKey, secrets.ViewerKey)
	logf("sending %d bad requests (seed %d, %d workers)", len(reqs), opts.Seed, opts.Workers)
	rep.BadInput = runBadInput(c, reqs, opts.Workers)
	rep.BadInput.HTTPGetSSRFChecked, rep.BadInput.HTTPGetSSRFAccepted = checkHTTPGetSSRF(c, fake, ssrfChecks, rep.BadInput)
	if h := c.send(request{Method: "GET", Path: "/health"}); h.Status != 200 {
		rep.BadInput.Unhealthy++
		rep.BadInput.Examples = append(rep.BadInput.Examples, fmt.Sprintf("/health after the bad input: %d %s", h.Status, h.Raw))
	}
	after, err := snapshot(c)
	if err != nil {
		return nil, err
	}
	for _, d := range before.diff(after) {
		rep.BadInput.StateChanged++
		rep.BadInput.Examples = append(rep.BadInput.Examples, "state changed: "+d)
	}

	logf("asking package installs for every SSRF form")
	if rep.PackageSSRF, err = checkPackageInstallSSRF(c, logf); err != nil {
		return nil, err
	}

	// 2. Secrets: make the provider echo them, then (after the kills,
	// which add restarts' logs and recovered work) search every surface.
	logf("triggering the provider-echo failure")
	triggered := triggerLeaks(c, secrets, sink, logf)

	// 2b. Key-count bombs and webhook callers who hang up (issue 42).
	rep.Hardening = &Hardening{}
	logf("sending key-count bombs and hanging up on queued webhooks")
	runKeyBombs(c, rep.Hardening)
	runWebhookHangups(g.base, secrets.AdminKey, fake, rep.Hardening)

	// 3. SIGKILL while work is in flight; readiness must come back.
	if opts.Kills > 0 {
		logf("killing the gateway %d times", opts.Kills)
		rep.Crash, err = runCrashes(g, c, fake, opts.Seed, opts.Kills, logf)
		if err != nil {
			return nil, err
		}
		checkReadyAfterCrash(c, rep.Hardening)
	}
	logf("searching every surface for the planted secrets")
	rep.Secrets = scan(secrets, surfaces(c, g, sink))
	rep.Secrets.Triggered = triggered
	rep.WallSeconds = time.Since(began).Seconds()
	rep.Failures = failures(rep)
	return rep, nil
}

// state is what bad input must not change.
type state map[string]string

// snapshot reads the canary tasks (made on first use), the configuration,
// the channels, the agents and the secret names.
func snapshot(c *client) (state, error) {
	for i := 1; i <= 3; i++ {
		if a := c.call("GET", fmt.Sprintf("/api/v1/workboard/tasks/%d", i), nil); a.Status == 404 {
			if r := c.call("POST", "/api/v1/workboard/tasks", map[string]any{"title": canaryTitle(i), "agent_id": "probe"}); r.Status != 201 {
				return nil, fmt.Errorf("create canary task: %d %s", r.Status, r.Raw)
			}
		}
	}
	s := state{}
	for _, p := range []string{"/api/v1/workboard/tasks/1", "/api/v1/workboard/tasks/2", "/api/v1/workboard/tasks/3",
		"/api/v1/config", "/api/v1/channels/webhook", "/api/v1/agents", "/api/v1/secrets", "/api/v1/approvals"} {
		a := c.call("GET", p, nil)
		s[p] = fmt.Sprintf("%d %s", a.Status, stable(a.JSON))
	}
	return s, nil
}

// stable drops the fields that move on their own (times, counters of
// traffic) so two snapshots compare what requests could change.
func stable(v any) string {
	var clean func(any) any
	clean = func(v any) any {
		switch t := v.(type) {
		case map[string]any:
			out := map[string]any{}
			for k, x := range t {
				if _, counters := x.(map[string]any); k == "status" && counters {
					continue // a channel's delivery counters
				}
				if strings.HasSuffix(k, "_at") || k == "loaded" || k == "uptime" || k == "stats" || k == "last_run" {
					continue
				}
				out[k] = clean(x)
			}
			return out
		case []any:
			out := make([]any, len(t))
			for i, x := range t {
				out[i] = clean(x)
			}
			return out
		}
		return v
	}
	b, _ := json.Marshal(clean(v))
	return string(b)
}

func (s state) diff(o state) []string {
	var out []string
	for k, v := range s {
		if o[k] != v {
			out = append(out, fmt.Sprintf("%s: %.300s -> %.300s", k, v, o[k]))
		}
	}
	sort.Strings(out)
	return out
}

// failures names the must-be-0 figures that are not 0.
func failures(r *Report) []string {
	var out []string
	check := func(name string, n int) {
		if n != 0 {
			out = append(out, fmt.Sprintf("%s: %d", name, n))
		}
	}
	b := r.BadInput
	check("5xx on bad input", b.ServerErrors)
	check("answers outside the error envelope", b.NonEnvelope)
	check("hangs", b.Hangs)
	check("wrong credentials accepted", b.WrongAuthOK)
	check("RFC 7235 spellings refused", b.RightAuthNotOK)
	check("SSRF forms accepted", b.SSRFAccepted)
	check("http_get SSRF forms fetched", b.HTTPGetSSRFAccepted)
	check("non-canonical ids accepted", b.NonCanonicalOK)
	check("state changed by bad input", b.StateChanged)
	check("unhealthy after bad input", b.Unhealthy)
	check("secrets found", r.Secrets.Total)
	if p := r.PackageSSRF; p != nil {
		check("package-install SSRF: trap connections", p.Dialed)
		check("package-install SSRF: forms not refused", p.NotRefused)
	}
	if h := r.Hardening; h != nil {
		check("key-count bombs not refused with 413", h.KeyBombsAdmitted)
		check("provider calls after a webhook caller hung up", h.ProviderAfterHangup)
		check("not ready after the kills", h.NotReady)
	}
	if c := r.Crash; c != nil {
		check("orphaned records", c.Orphaned)
		check("stuck records", c.Stuck)
		check("lost records", c.Lost)
		check("idempotency claims blocking retries", c.BlockedClaims)
		check("provider calls missing from the ledger", c.MissingLedger)
	}
	return out
}

// WriteTable prints the report for people.
func (r *Report) WriteTable(w io.Writer) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	row := func(a, b any, must bool) {
		mark := ""
		if must {
			mark = "must be 0"
		}
		fmt.Fprintf(tw, "%v\t%v\t%s\n", a, b, mark)
	}
	b := r.BadInput
	fmt.Fprintf(tw, "BAD INPUT (seed %d)\t\t\n", r.Seed)
	row("requests", b.Requests, false)
	for _, k := range sortedKeys(b.Classes) {
		row("  answers "+k, b.Classes[k], false)
	}
	row("  connection closed (oversized bodies)", b.ConnErrors, false)
	row("5xx", b.ServerErrors, true)
	row("not in the {\"error\": ...} envelope", b.NonEnvelope, true)
	row("hangs (no answer in time)", b.Hangs, true)
	row("wrong credentials accepted", b.WrongAuthOK, true)
	row("RFC 7235 spellings refused", b.RightAuthNotOK, true)
	row("SSRF forms accepted (delivery to, MCP, skills)", b.SSRFAccepted, true)
	row(fmt.Sprintf("SSRF forms fetched by http_get (of %d)", b.HTTPGetSSRFChecked), b.HTTPGetSSRFAccepted, true)
	row("non-canonical ids accepted", b.NonCanonicalOK, true)
	row("state changed by bad input", b.StateChanged, true)
	row("unhealthy afterwards", b.Unhealthy, true)
	if p := r.PackageSSRF; p != nil {
		row(fmt.Sprintf("package-install SSRF: trap connections (%d sources)", p.Checked), p.Dialed, true)
		row("package-install SSRF: sources not refused by the policy", p.NotRefused, true)
	}
	fmt.Fprintf(tw, "\t\t\nSECRETS (%d planted)\t\t\n", r.Secrets.Planted)
	for _, k := range sortedKeys(r.Secrets.Found) {
		row(fmt.Sprintf("found in %s (%d bytes)", k, r.Secrets.Searched[k]), r.Secrets.Found[k], true)
	}
	if c := r.Crash; c != nil {
		fmt.Fprintf(tw, "\t\t\nSIGKILL\t\t\n")
		row("kills", c.Kills, false)
		for _, k := range sortedKeys(c.Items) {
			row("  work: "+k, c.Items[k], false)
		}
		row("finished after restart", c.Finished, false)
		row("orphaned records", c.Orphaned, true)
		row("stuck records", c.Stuck, true)
		row("lost records", c.Lost, true)
		row("idempotency claims blocking retries", c.BlockedClaims, true)
		row("slowest claim takeover (ms)", c.SlowestClaimMs, false)
		row(fmt.Sprintf("provider calls missing from the ledger (%d seen, %d counted)", c.ProviderCalls, c.LedgerCalls), c.MissingLedger, true)
	}
	if h := r.Hardening; h != nil {
		fmt.Fprintf(tw, "\t\t\nHARDENING (issue 42)\t\t\n")
		row(fmt.Sprintf("key-count bombs not refused with 413 (of %d; slowest %d ms)", h.KeyBombs, h.KeyBombSlowestMs), h.KeyBombsAdmitted, true)
		row(fmt.Sprintf("provider calls after a webhook caller hung up (of %d queued)", h.HangupCalls), h.ProviderAfterHangup, true)
		if r.Crash != nil {
			row(fmt.Sprintf("not ready after the kills (/health/ready %d, costs check %s)", h.ReadyStatus, h.CostsCheck), h.NotReady, true)
		}
	}
	fmt.Fprintf(tw, "\t\t\nwall time\t%.0f s\t\n", r.WallSeconds)
	tw.Flush()
	examples := append(append([]string{}, b.Examples...), r.Secrets.Examples...)
	if r.PackageSSRF != nil {
		examples = append(examples, r.PackageSSRF.Examples...)
	}
	if r.Crash != nil {
		examples = append(examples, r.Crash.Examples...)
	}
	if r.Hardening != nil {
		examples = append(examples, r.Hardening.Examples...)
	}
	if len(examples) > 0 {
		fmt.Fprintln(w, "\nexamples:")
		for _, e := range examples {
			fmt.Fprintln(w, "  "+e)
		}
	}
	if r.OK() {
		fmt.Fprintln(w, "\nOK: every must-be-0 figure is 0")
	} else {
		fmt.Fprintln(w, "\nFAIL: "+strings.Join(r.Failures, "; "))
	}
}

func sortedKeys(m map[string]int) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
