package sandbox

import (
	"fmt"
	"os"
)

// Command is the confined command line of a long-lived process (a plugin
// speaking MCP over stdio, internal/plugins): the same prlimit and bwrap
// confinement as Run, req.Dir bound read-write as /work and req.Mounts
// read-only, but started and owned by the caller (its stdin and stdout are
// the caller's pipes). caps are used as given (a plugin's CPU time is
// counted over its whole life). The process's environment is set inside
// the command (bwrap --setenv); env is what the caller must give the
// process itself (the unconfined case, runtime.sandbox.allow_unconfined).
func (j *Jail) Command(req Request, caps Caps) (argv, env []string, err error) {
	if len(req.Argv) == 0 {
		return nil, nil, fmt.Errorf("sandbox command: no argv")
	}
	if err := j.ready(req); err != nil {
		return nil, nil, err
	}
	if err := os.MkdirAll(req.Dir, 0o700); err != nil {
		return nil, nil, fmt.Errorf("sandbox work folder: %w", err)
	}
	if j.bwrap == "" {
		env = j.env(req)
	}
	return j.argv(req, caps, "", req.Argv), env, nil
}
