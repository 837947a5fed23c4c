package agentry

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"sort"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/agentryhq/agentry/internal/apiclient"
	"github.com/agentryhq/agentry/internal/config"
)

// Check outcomes of doctor. Only "fail" makes the exit code nonzero.
const (
	checkOK   = "ok"
	checkWarn = "warn"
	checkFail = "fail"
	checkSkip = "skip"
)

type doctorCheck struct {
	Name   string `json:"name"`
	Status string `json:"status"`
	Detail string `json:"detail"`
}

type doctorReport struct {
	OK           bool          `json:"ok"`
	Gateway      string        `json:"gateway_url,omitempty"`
	HardFailures int           `json:"hard_failures"`
	Warnings     int           `json:"warnings"`
	Checks       []doctorCheck `json:"checks"`
}

func (a *App) doctorCommand() *cobra.Command {
	var manifest string
	cmd := &cobra.Command{
		Use:   "doctor [--json]",
		Short: "Diagnose the setup: config, workspace, gateway, auth, Temporal, provider, update manifest",
		Long: `Runs every check and prints ok, warn, fail or skip for each.
Hard failures (exit 1): the configuration does not load, the workspace is not
writable, the gateway is unreachable, the credentials are refused, the
gateway's database or Temporal is down.
Warnings (exit 0): the default LLM provider does not answer, the update
manifest cannot be read, the workspace does not exist yet.`,
		Args:        noArgs,
		Annotations: map[string]string{annotationNoTarget: "true"},
		RunE: func(cmd *cobra.Command, _ []string) error {
			rep := a.doctor(cmd.Context(), manifest)
			if a.jsonOut {
				if err := printValue(a.Stdout, rep); err != nil {
					return err
				}
			} else {
				rows := [][]string{}
				for _, c := range rep.Checks {
					rows = append(rows, []string{c.Name, c.Status, c.Detail})
				}
				table(a.Stdout, []string{"CHECK", "STATUS", "DETAIL"}, rows)
				fmt.Fprintf(a.Stdout, "\n%d hard failure(s), %d warning(s).\n", rep.HardFailures, rep.Warnings)
			}
			if rep.HardFailures > 0 {
				return silentFailure()
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&manifest, "manifest", "", "release manifest to check (default: AGENTRY_UPDATE_MANIFEST or updates.manifest_url)")
	return cmd
}

func (a *App) doctor(ctx context.Context, manifestFlag string) doctorReport {
	var rep doctorReport
	add := func(name, status, format string, args ...any) {
		rep.Checks = append(rep.Checks, doctorCheck{Name: name, Status: status, Detail: fmt.Sprintf(format, args...)})
	}
	// 1. Local configuration.
	switch {
	case a.cfgErr != nil:
		add("config", checkFail, "%v", a.cfgErr)
	case a.cfg.Path == "":
		add("config", checkOK, "no config file; built-in defaults (workspace %s)", a.cfg.Workspace.Root)
	default:
		add("config", checkOK, "%s is valid", a.cfg.Path)
	}
	// 1b. Keys this version would ignore (issue 43): named apart from the
	// config check, so that the operator sees the list at a glance.
	var unsupported *config.UnsupportedError
	switch {
	case errors.As(a.cfgErr, &unsupported):
		add("unsupported keys", checkFail, "%s: not supported yet; remove them", strings.Join(unsupported.Keys, ", "))
	case a.cfgErr == nil:
		add("unsupported keys", checkOK, "none set (refused when set: %s)", strings.Join(config.UnsupportedKeys(), ", "))
	default:
		add("unsupported keys", checkSkip, "config.yaml does not load")
	}
	// 1c. Keys in no part of the schema (typos, another version's keys):
	// kept in the file and read by nothing, so a warning, not a failure.
	if a.cfg != nil && a.cfg.Path != "" {
		if unknown := config.UnknownKeysInFile(a.cfg.Path); len(unknown) > 0 {
			names := make([]string, len(unknown))
			for i, u := range unknown {
				names[i] = u.String()
			}
			add("unknown keys", checkWarn, "%s: read by nothing (kept in the file)", strings.Join(names, ", "))
		} else {
			add("unknown keys", checkOK, "none in %s", a.cfg.Path)
		}
	}
	// 2. Workspace, for a local target only: a remote gateway's workspace
	// is on its own host.
	switch {
	case a.targetErr == nil && !a.target.Local:
		add("workspace", checkSkip, "the target is remote")
	case a.cfg == nil:
		add("workspace", checkSkip, "no configuration")
	default:
		root := a.cfg.Workspace.Root
		if st, err := os.Stat(root); err != nil || !st.IsDir() {
			add("workspace", checkWarn, "%s does not exist yet (the gateway or `agentry setup` creates it)", root)
		} else if f, err := os.CreateTemp(root, ".agentry-doctor-*"); err != nil {
			add("workspace", checkFail, "%s is not writable: %v", root, err)
		} else {
			f.Close()
			os.Remove(f.Name())
			add("workspace", checkOK, "%s is writable", root)
		}
	}
	// 3-7. The gateway.
	a.doctorGateway(ctx, &rep, add)
	// 8. Update manifest.
	if src, err := a.manifestSource(manifestFlag); err != nil {
		add("update manifest", checkSkip, "none configured (updates.manifest_url or AGENTRY_UPDATE_MANIFEST)")
	} else {
		mctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		m, err := loadManifest(mctx, src)
		cancel()
		switch {
		case err != nil:
			add("update manifest", checkWarn, "%v", err)
		default:
			r := a.report(m, src)
			if r.UpdateAvailable {
				add("update manifest", checkOK, "%s offers %s (this client: %s)", src, m.Version, a.Version)
			} else {
				add("update manifest", checkOK, "%s: up to date (%s)", src, m.Version)
			}
		}
	}
	for _, c := range rep.Checks {
		switch c.Status {
		case checkFail:
			rep.HardFailures++
		case checkWarn:
			rep.Warnings++
		}
	}
	rep.OK = rep.HardFailures == 0
	return rep
}

func (a *App) doctorGateway(ctx context.Context, rep *doctorReport, add func(name, status, format string, args ...any)) {
	skipRest := func(why string) {
		for _, n := range []string{"auth", "database", "temporal", "default provider"} {
			add(n, checkSkip, "%s", why)
		}
	}
	if a.targetErr != nil {
		add("gateway", checkFail, "%v", a.targetErr)
		skipRest("no gateway")
		return
	}
	rep.Gateway = a.target.URL
	c, err := a.client(10 * time.Second)
	if err != nil {
		add("gateway", checkFail, "%v", err)
		skipRest("no gateway")
		return
	}
	h, err := c.Health(ctx)
	if err != nil {
		add("gateway", checkFail, "%v", err)
		skipRest("the gateway is unreachable")
		return
	}
	add("gateway", checkOK, "%s answers (version %s, %s)", a.target.Describe(), h.Version, h.Status)
	authOK := false
	switch who, err := c.Whoami(ctx); {
	case a.target.APIKey == "":
		add("auth", checkFail, "no API key: pass --api-key, set AGENTRY_API_KEY or a context's api_key")
	case err != nil:
		add("auth", checkFail, "credentials (from %s) refused: %v", a.target.KeyFrom, err)
	default:
		authOK = true
		add("auth", checkOK, "authenticated as %s (role %s, key from %s)", who.Subject, who.Role, a.target.KeyFrom)
	}
	for _, dep := range []string{"database", "temporal"} {
		chk, ok := h.Checks[dep]
		switch {
		case !ok:
			add(dep, checkWarn, "the gateway does not report %s health", dep)
		case chk.Status == "ok":
			add(dep, checkOK, "reachable (as seen by the gateway)")
		default:
			add(dep, checkFail, "%s", chk.Error)
		}
	}
	// The isolation run_python runs under (docs/sandbox.md); a refusal or
	// unconfined running is a warning check below.
	if chk, ok := h.Checks["sandbox"]; ok && chk.Status == "ok" {
		add("sandbox", checkOK, "%s", chk.Detail)
	}
	// Alerting checks (costs: attribution below 100 %) warn: the gateway
	// stays in service, but an operator should look (docs/operations.md).
	for _, name := range sortedKeys(h.Checks) {
		chk := h.Checks[name]
		if chk.Severity != "warning" || chk.Status == "ok" {
			continue
		}
		msg := chk.Error
		if !chk.AcknowledgedAt.IsZero() {
			msg += fmt.Sprintf(" (acknowledged by %s at %s)", chk.AcknowledgedBy, chk.AcknowledgedAt.Format(time.RFC3339))
		} else {
			msg += fmt.Sprintf(" (acknowledge: POST /api/v1/health/checks/%s/acknowledge)", name)
		}
		add(name, checkWarn, "%s", msg)
	}
	if !authOK {
		add("default provider", checkSkip, "needs working credentials")
		return
	}
	a.doctorChannels(ctx, c, add)
	d, err := c.Diagnostics(ctx)
	switch {
	case apiclient.IsStatus(err, http.StatusNotFound):
		add("default provider", checkWarn, "this gateway cannot check its provider (no /diagnostics)")
	case err != nil:
		add("default provider", checkWarn, "%v", err)
	default:
		found := false
		for _, chk := range d.Checks {
			if chk.Name != "default_provider" {
				continue
			}
			found = true
			status := checkOK
			if chk.Status != "ok" {
				status = checkWarn // chat fails, but the gateway itself works
			}
			add("default provider", status, "%s", chk.Detail)
		}
		if !found {
			add("default provider", checkWarn, "not reported")
		}
	}
}

// sortedKeys lists a map's keys in order.
func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// doctorChannels warns about enabled messaging channels whose receiver is
// not connected (refused token, platform unreachable, WhatsApp unpaired).
func (a *App) doctorChannels(ctx context.Context, c *apiclient.Client, add func(name, status, format string, args ...any)) {
	l, err := c.Channels(ctx)
	if err != nil {
		add("channels", checkWarn, "%v", err)
		return
	}
	var up, down []string
	for _, ch := range l.Channels {
		if ch.Type == "webhook" || !ch.Enabled {
			continue
		}
		switch ch.Adapter.State {
		case "connected", "paired":
			up = append(up, ch.ID)
		default:
			msg := ch.ID + " " + ch.Adapter.State
			if ch.Adapter.LastError != "" {
				msg += " (" + ch.Adapter.LastError + ")"
			}
			down = append(down, msg)
		}
	}
	switch {
	case len(down) > 0:
		add("channels", checkWarn, "not receiving: %s", strings.Join(down, "; "))
	case len(up) > 0:
		add("channels", checkOK, "receiving: %s", strings.Join(up, ", "))
	default:
		add("channels", checkOK, "no messaging channel enabled")
	}
}
