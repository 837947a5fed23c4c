package config

import (
	"fmt"
	"os"
	"path/filepath"
)

// Workspace is the on-disk layout of one gateway installation. The root is
// AGENTRY_WORKSPACE, or ~/.agentry. Everything the gateway writes lives below
// it, one folder a job, so a workspace can be backed up or moved as a whole.
type Workspace struct {
	Root string
	// LegacyDir is the flat layout of older installs (~/agentry: config.yaml,
	// agent files and the database side by side). It is still read for
	// config.yaml; `agentry workspace migrate` moves it into Root.
	LegacyDir string
}

// ResolveWorkspace reads AGENTRY_WORKSPACE or falls back to ~/.agentry.
func ResolveWorkspace(env Env) (Workspace, error) {
	home, _ := os.UserHomeDir()
	ws := Workspace{}
	if home != "" {
		ws.LegacyDir = filepath.Join(home, "agentry")
	}
	if v, ok := env(EnvWorkspace); ok && v != "" {
		abs, err := filepath.Abs(v)
		if err != nil {
			return ws, fmt.Errorf("%s=%s: %w", EnvWorkspace, v, err)
		}
		ws.Root = abs
		return ws, nil
	}
	if home == "" {
		return ws, fmt.Errorf("no home directory to hold the workspace; set %s", EnvWorkspace)
	}
	ws.Root = filepath.Join(home, ".agentry")
	return ws, nil
}

// ConfigFile is <root>/config.yaml.
func (w Workspace) ConfigFile() string { return filepath.Join(w.Root, "config.yaml") }

// DataDir holds the application database and the embedded Temporal database.
func (w Workspace) DataDir() string { return filepath.Join(w.Root, "data") }

// AgentsDir holds agent definition files (*.yaml).
func (w Workspace) AgentsDir() string { return filepath.Join(w.Root, "agents") }

// SkillsDir holds installed skills.
func (w Workspace) SkillsDir() string { return filepath.Join(w.Root, "skills") }

// PluginsDir holds installed plugins.
func (w Workspace) PluginsDir() string { return filepath.Join(w.Root, "plugins") }

// ArtifactsDir holds files produced by task runs; artifact paths never leave it.
func (w Workspace) ArtifactsDir() string { return filepath.Join(w.Root, "artifacts") }

// BlobsDir holds the content-addressed files of durable runs' large
// messages (internal/runlog).
func (w Workspace) BlobsDir() string { return filepath.Join(w.Root, "blobs") }

// SessionsDir holds the per-session work directories of chat sessions.
func (w Workspace) SessionsDir() string { return filepath.Join(w.Root, "sessions") }

// MCPServersDir holds managed stdio MCP server executables.
func (w Workspace) MCPServersDir() string { return filepath.Join(w.Root, "mcp-servers") }

// CredentialsDir holds secrets such as the generated API key (mode 0700).
func (w Workspace) CredentialsDir() string { return filepath.Join(w.Root, "credentials") }

// LogsDir holds the gateway log file when log.file is relative.
func (w Workspace) LogsDir() string { return filepath.Join(w.Root, "logs") }

// APIKeyFile is where a generated API key is kept (mode 0600).
func (w Workspace) APIKeyFile() string { return filepath.Join(w.CredentialsDir(), "api_key") }

// Ensure creates the layout. Credentials are private to the owner.
func (w Workspace) Ensure() error {
	for _, d := range []string{w.Root, w.DataDir(), w.AgentsDir(), w.SkillsDir(), w.PluginsDir(),
		w.ArtifactsDir(), w.SessionsDir(), w.MCPServersDir(), w.LogsDir()} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return fmt.Errorf("create workspace folder %s: %w", d, err)
		}
	}
	if err := os.MkdirAll(w.CredentialsDir(), 0o700); err != nil {
		return fmt.Errorf("create workspace folder %s: %w", w.CredentialsDir(), err)
	}
	return nil
}
