package skills

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/agentryhq/agentry/drivers"
	"github.com/agentryhq/agentry/internal/sandbox"
	"github.com/agentryhq/agentry/internal/scrub"
)

// Permissions are what a skill's manifest asks for at run time:
//
//	permissions:
//	  network: true        # the script may open connections
//	  commands: [git, jq]  # host commands on its PATH (also in runtime.system_tools)
//
// Without them a tool script runs in the sandbox with no network and
// only the interpreter on its PATH.
type Permissions struct {
	Network  bool     `json:"network,omitempty" yaml:"network"`
	Commands []string `json:"commands,omitempty" yaml:"commands"`
}

// consentFile records what the operator consented to when installing a
// skill: beside the skill folders (not inside, so the skill's digest is
// unchanged), one file per skill.
func consentFile(dest, name string) string {
	return filepath.Join(dest, ".agentry-consent-"+name+".json")
}

type consent struct {
	Digest      string      `json:"digest"`
	Permissions Permissions `json:"permissions"`
	At          time.Time   `json:"at"`
}

// writeConsent records that installing s (its digest) granted its
// permissions.
func writeConsent(dest string, s *Skill) error {
	b, err := json.Marshal(consent{Digest: s.Digest, Permissions: s.Permissions, At: time.Now().UTC()})
	if err != nil {
		return err
	}
	if err := os.WriteFile(consentFile(dest, s.Name), b, 0o600); err != nil {
		return fmt.Errorf("record the consent to skill %s: %w", s.Name, err)
	}
	return nil
}

// Granted is what s may use at run time: what its manifest asks for, only
// as far as an install consented to it for exactly this content (its
// digest). A skill placed by hand, or changed since its install, gets no
// network and no commands.
func Granted(s *Skill) Permissions {
	b, err := os.ReadFile(consentFile(filepath.Dir(s.Dir), s.Name))
	if err != nil {
		return Permissions{}
	}
	var c consent
	if json.Unmarshal(b, &c) != nil || c.Digest != s.Digest {
		return Permissions{}
	}
	g := Permissions{Network: c.Permissions.Network && s.Permissions.Network}
	for _, cmd := range s.Permissions.Commands {
		if slices.Contains(c.Permissions.Commands, cmd) {
			g.Commands = append(g.Commands, cmd)
		}
	}
	return g
}

// skillMount is where a skill's folder is seen inside the sandbox
// (read-only).
const skillMount = "/skill"

// runConfined runs script of the skill in dir inside the jail: the skill
// folder read-only at /skill, a fresh work folder (or workDir) as /work,
// the grants' network and commands, the call's JSON on stdin.
func (r Runner) runConfined(ctx context.Context, dir, script string, args json.RawMessage, workDir string, grants Permissions) Outcome {
	timeout := r.Timeout
	if timeout <= 0 {
		timeout = 30 * time.Second
	}
	out := Outcome{timeout: timeout}
	if workDir == "" {
		work, err := os.MkdirTemp("", "agentry-skill-run-")
		if err != nil {
			out.Error = "cannot make a working folder: " + err.Error()
			return out
		}
		defer os.RemoveAll(work)
		workDir = work
	}
	caps := r.Caps
	if caps.WallTime <= 0 || caps.WallTime > timeout {
		caps.WallTime = timeout
	}
	caps.Network = grants.Network
	var tools []string
	for _, c := range grants.Commands {
		if r.Jail.HasTool(c) {
			tools = append(tools, c)
		}
	}
	req := sandbox.Request{Argv: []string{skillMount + "/" + filepath.ToSlash(filepath.Clean(script))}, Stdin: args, Dir: workDir,
		Mounts: []sandbox.Mount{{Host: dir, Sandbox: skillMount}}, Env: map[string]string{"SKILL_DIR": skillMount},
		Tools: tools, Caps: caps}
	if key := drivers.IdempotencyKey(ctx); key != "" {
		req.Env[drivers.IdempotencyKeyEnv] = key
	}
	res, err := r.Jail.Run(ctx, req)
	out.DurationMS = res.Duration.Milliseconds()
	if err != nil {
		if errors.Is(err, sandbox.ErrUnavailable) {
			out.Error = "the skill cannot run: " + err.Error()
		} else {
			out.Error = fmt.Sprintf("cannot run %s: %v", script, err)
		}
		out.ExitCode = -1
		return out
	}
	out.Sandbox = &res
	out.NetworkIsolated = !grants.Network
	out.Confinement = r.Jail.Isolation().Summary()
	out.Stdout, out.Stderr = scrub.String(res.Stdout), scrub.String(res.Stderr)
	if res.StdoutTruncated {
		out.Stdout += "\n[truncated]"
	}
	out.ExitCode = res.ExitCode
	switch res.CapHit {
	case sandbox.CapWallTime:
		out.TimedOut = true
	case sandbox.CapNone:
	default:
		out.CapHit = string(res.CapHit)
	}
	if strings.Contains(out.Stderr, "bwrap: execvp") {
		out.Error = fmt.Sprintf("cannot run %s in the sandbox: %s (a #! interpreter must be under /usr or be python3)", script, strings.TrimSpace(out.Stderr))
	}
	return out
}

// RunIn runs a tool script confined with workDir as its work folder and
// grants (tests: the escape suite against a skill's script).
func (r Runner) RunIn(ctx context.Context, dir, script string, args json.RawMessage, workDir string, grants Permissions) Outcome {
	return r.runConfined(ctx, dir, script, args, workDir, grants)
}
