package agentry

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/charmbracelet/huh"
	"github.com/spf13/cobra"

	"github.com/agentryhq/agentry/internal/config"
	"github.com/agentryhq/agentry/internal/secrets/seed"
)

// onboardTemplates are the first agents onboard can create.
var onboardTemplates = map[string]string{
	"assistant": "id: %s\ndescription: Friendly assistant that answers briefly (created by agentry onboard)\nsystem_prompt: |\n  You are a helpful assistant. Answer briefly and clearly.\n",
	"writer":    "id: %s\ndescription: Writes notes and reports as files (created by agentry onboard)\nsystem_prompt: |\n  When asked for a note or report, write it as a Markdown file with write_file\n  and reply with a one-line summary.\n",
}

// OnboardMinFreeBytes is the free disk space onboard wants in the workspace.
const OnboardMinFreeBytes = 512 << 20

type onboardAnswers struct {
	setupAnswers
	Agent    string `json:"agent"`
	Template string `json:"template"`
	// apiKey is the provider's key when one was given (typed in the form or
	// read from stdin): handed to the gateway as a seeded secret, never
	// written to config.yaml, never printed.
	apiKey string
}

// onboardKeySecret is the name of the secret onboard stores a provider's
// key under.
func onboardKeySecret(provider string) string { return "llm-" + provider }

type onboardCheck struct {
	Name   string `json:"name"`
	Status string `json:"status"` // ok, warn, fail
	Detail string `json:"detail"`
}

func (a *App) onboardCommand() *cobra.Command {
	var ans onboardAnswers
	var nonInteractive, force, installDaemon, keyStdin bool
	cmd := &cobra.Command{
		Use:   "onboard",
		Short: "First run: check this machine, write config.yaml and a first agent, then say the one command to try",
		Long: `Checks the machine (the port is free, the model runtime answers, disk space),
writes config.yaml atomically (the provider and its model), creates a first
agent from a template and ends with the command to try. A provider key typed
in the form or given with --api-key-stdin is never written to config.yaml: it
is left for the gateway, which seals it into its secret store (secret
llm-<provider>, credentials.provider) at its first start and removes the file;
config.yaml names the secret (api_key_secret). Without a key, config.yaml
names the environment variable that will hold it (--api-key-env).

In a terminal it asks with a form; --non-interactive takes everything from
flags and defaults (required without a terminal). Refused for remote targets.`,
		Args:        noArgs,
		Annotations: map[string]string{AnnotationHostChanging: "true"},
		RunE: func(cmd *cobra.Command, _ []string) error {
			if keyStdin && !nonInteractive {
				return usagef("--api-key-stdin reads the key from stdin, which the form needs: use it with --non-interactive; nothing was written")
			}
			if !nonInteractive && !isTerminal(a.Stdin) {
				return usagef("onboard asks its questions in a terminal; without one, pass --non-interactive and the answers as flags (agentry onboard --help); nothing was written")
			}
			ws, err := config.ResolveWorkspace(a.Env)
			if err != nil {
				return err
			}
			path := ws.ConfigFile()
			if p, ok := a.Env(config.EnvConfigPath); ok && p != "" {
				path = p
			}
			if _, err := os.Stat(path); err == nil && !force {
				return fmt.Errorf("%s exists: this workspace is set up (agentry setup --force changes it; onboard --force redoes the first run); nothing was written", path)
			}
			f := cmd.Flags()
			if !nonInteractive {
				if err := a.onboardForm(&ans, f.Changed); err != nil {
					return err
				}
			}
			if keyStdin {
				raw, err := io.ReadAll(io.LimitReader(a.Stdin, 64<<10))
				if err != nil {
					return fmt.Errorf("read the key from stdin: %w; nothing was written", err)
				}
				if ans.apiKey = strings.TrimSpace(string(raw)); ans.apiKey == "" {
					return usagef("--api-key-stdin: stdin held no key; nothing was written")
				}
			}
			if err := completeOnboard(&ans, f.Changed); err != nil {
				return err
			}
			checks := onboardChecks(cmd.Context(), ws.Root, ans)
			for _, c := range checks {
				if c.Status == "fail" {
					if a.jsonOut {
						printValue(a.Stdout, map[string]any{"checks": checks, "written": false})
					}
					return fmt.Errorf("check %s failed: %s; nothing was written", c.Name, c.Detail)
				}
			}
			if err := ws.Ensure(); err != nil {
				return err
			}
			seeded := ""
			if ans.apiKey != "" {
				// The seed first, then the configuration that names it: a
				// configuration that fails to write takes the seed back.
				ans.APIKeySecret, ans.APIKeyEnv = onboardKeySecret(ans.Provider), ""
				if err := seed.Write(ws.CredentialsDir(), ans.APIKeySecret, ans.apiKey); err != nil {
					return fmt.Errorf("keep the key for the gateway: %w; nothing was written", err)
				}
				seeded = filepath.Join(seed.Dir(ws.CredentialsDir()), ans.APIKeySecret)
			}
			if err := a.writeSetup(path, ans.setupAnswers); err != nil {
				if seeded != "" {
					os.Remove(seeded)
				}
				return err
			}
			agentPath := filepath.Join(ws.AgentsDir(), ans.Agent+".yaml")
			agentWritten := false
			if _, err := os.Stat(agentPath); errors.Is(err, os.ErrNotExist) {
				body := fmt.Sprintf(onboardTemplates[ans.Template], ans.Agent)
				if err := config.WriteFileAtomic(agentPath, []byte(body), 0o644); err != nil {
					return fmt.Errorf("write the first agent: %w", err)
				}
				agentWritten = true
			}
			try := fmt.Sprintf("agentry server start & sleep 3; agentry chat --agent %s \"Hello!\"", ans.Agent)
			if a.jsonOut {
				return printValue(a.Stdout, map[string]any{"checks": checks, "written": true, "config_file": path, "workspace": ws.Root,
					"agent_file": agentPath, "agent_written": agentWritten, "settings": ans, "try": try})
			}
			for _, c := range checks {
				fmt.Fprintf(a.Stdout, "%-4s %-14s %s\n", c.Status, c.Name, c.Detail)
			}
			fmt.Fprintf(a.Stdout, "Wrote %s (workspace %s).\n", path, ws.Root)
			if agentWritten {
				fmt.Fprintf(a.Stdout, "Created agent %s (%s).\n", ans.Agent, agentPath)
			} else {
				fmt.Fprintf(a.Stdout, "Kept the existing agent file %s.\n", agentPath)
			}
			if ans.APIKeySecret != "" {
				fmt.Fprintf(a.Stdout, "The key goes into the gateway's secret store (secret %s) at its first start; config.yaml only names it.\n", ans.APIKeySecret)
			} else if ans.APIKeyEnv != "" {
				fmt.Fprintf(a.Stdout, "Set %s in the gateway's environment (the key is never written to config.yaml).\n", ans.APIKeyEnv)
			}
			if installDaemon {
				// The daemon command's own install (kardianos/service); the
				// configuration stays written whatever it answers.
				d := &App{Version: a.Version, Env: a.Env, Stdin: a.Stdin, Stdout: a.Stdout, Stderr: a.Stderr}
				if code := d.Run(cmd.Context(), []string{"daemon", "install"}); code != ExitOK {
					fmt.Fprintf(a.Stdout, "Try it:\n  %s\n", try)
					return &exitError{code: ExitFailure, msg: "the configuration is written, but the daemon was not installed (see above)"}
				}
				try = fmt.Sprintf("agentry daemon start && sleep 3 && agentry chat --agent %s \"Hello!\"", ans.Agent)
			}
			fmt.Fprintf(a.Stdout, "Try it:\n  %s\n", try)
			return nil
		},
	}
	f := cmd.Flags()
	f.BoolVar(&nonInteractive, "non-interactive", false, "ask nothing: take the answers from flags and defaults")
	f.BoolVar(&force, "force", false, "run even though config.yaml exists (the keys onboard sets are replaced, others kept)")
	f.StringVar(&ans.Host, "host", "127.0.0.1", "address the gateway listens on (server.host)")
	f.IntVar(&ans.Port, "port", 18789, "port the gateway listens on (server.port)")
	f.StringVar(&ans.Provider, "provider", "ollama", "model provider: ollama, openai or anthropic")
	f.StringVar(&ans.Model, "model", "", "default model (default: the provider's usual small model)")
	f.StringVar(&ans.BaseURL, "base-url", "", "provider base URL (default: the provider's; ollama http://127.0.0.1:11434)")
	f.StringVar(&ans.APIKeyEnv, "api-key-env", "", "environment variable holding the provider's key (openai, anthropic), when no key is given")
	f.BoolVar(&keyStdin, "api-key-stdin", false, "read the provider's key from stdin and hand it to the gateway's secret store (with --non-interactive)")
	f.StringVar(&ans.Agent, "agent", "assistant", "id of the first agent")
	f.StringVar(&ans.Template, "template", "assistant", "template of the first agent: assistant or writer")
	f.BoolVar(&installDaemon, "install-daemon", false, "also install the gateway as a service (agentry daemon install)")
	return cmd
}

// onboardForm asks the questions whose flags were not given, with a huh
// form on the terminal.
func (a *App) onboardForm(ans *onboardAnswers, given func(string) bool) error {
	port := strconv.Itoa(ans.Port)
	var fields []huh.Field
	if !given("provider") {
		fields = append(fields, huh.NewSelect[string]().Title("Model provider").
			Options(huh.NewOption("Ollama (local models)", "ollama"), huh.NewOption("OpenAI", "openai"), huh.NewOption("Anthropic", "anthropic")).
			Value(&ans.Provider))
	}
	if !given("port") {
		fields = append(fields, huh.NewInput().Title("Port of the gateway").Value(&port).Validate(func(s string) error {
			if n, err := strconv.Atoi(s); err != nil || n < 1 || n > 65535 {
				return errors.New("a port is 1-65535")
			}
			return nil
		}))
	}
	if !given("agent") {
		fields = append(fields, huh.NewInput().Title("Name of your first agent").Value(&ans.Agent).Validate(validAgentID))
	}
	if len(fields) > 0 {
		var in io.Reader = a.Stdin
		if err := huh.NewForm(huh.NewGroup(fields...)).WithInput(in).WithOutput(a.Stderr).Run(); err != nil {
			return fmt.Errorf("onboard: %w; nothing was written", err)
		}
	}
	ans.Port, _ = strconv.Atoi(port)
	pd := providerDefaults[ans.Provider]
	var more []huh.Field
	if !given("model") && ans.Model == "" {
		ans.Model = pd.model
		more = append(more, huh.NewInput().Title("Default model").Value(&ans.Model))
	}
	if ans.Provider != "ollama" && !given("api-key-env") {
		ans.APIKeyEnv = pd.keyEnv
		more = append(more,
			huh.NewInput().Title("API key (sealed into the gateway's secret store, never written to config.yaml; empty: an environment variable holds it)").
				EchoMode(huh.EchoModePassword).Value(&ans.apiKey),
			huh.NewInput().Title("Environment variable holding the API key, if you left the key empty").Value(&ans.APIKeyEnv))
	}
	if ans.Provider == "ollama" && !given("base-url") {
		ans.BaseURL = "http://127.0.0.1:11434"
		more = append(more, huh.NewInput().Title("Ollama's address").Value(&ans.BaseURL))
	}
	if len(more) > 0 {
		if err := huh.NewForm(huh.NewGroup(more...)).WithInput(a.Stdin).WithOutput(a.Stderr).Run(); err != nil {
			return fmt.Errorf("onboard: %w; nothing was written", err)
		}
	}
	return nil
}

func validAgentID(s string) error {
	if s == "" || len(s) > 64 || strings.Trim(s, "abcdefghijklmnopqrstuvwxyz0123456789-_") != "" {
		return errors.New("use lower-case letters, digits, - or _")
	}
	return nil
}

// completeOnboard fills defaults and refuses bad answers (usage errors).
func completeOnboard(ans *onboardAnswers, given func(string) bool) error {
	ans.Provider = strings.ToLower(ans.Provider)
	pd, ok := providerDefaults[ans.Provider]
	if !ok {
		return usagef("provider %q: use ollama, openai or anthropic", ans.Provider)
	}
	if ans.Model == "" {
		ans.Model = pd.model
	}
	if ans.Provider == "ollama" {
		ans.APIKeyEnv = ""
		if ans.BaseURL == "" {
			ans.BaseURL = "http://127.0.0.1:11434"
		}
	} else if ans.APIKeyEnv == "" {
		ans.APIKeyEnv = pd.keyEnv
	}
	if ans.Port < 1 || ans.Port > 65535 {
		return usagef("port %d: want 1-65535", ans.Port)
	}
	if err := validAgentID(ans.Agent); err != nil {
		return usagef("agent %q: %v", ans.Agent, err)
	}
	if _, ok := onboardTemplates[ans.Template]; !ok {
		return usagef("template %q: use assistant or writer", ans.Template)
	}
	if ans.LogLevel == "" {
		ans.LogLevel = "info"
	}
	return nil
}

// onboardChecks: the port is free (fail), the model runtime answers
// (warn: it may be started later), the workspace's disk has room (fail).
func onboardChecks(ctx context.Context, root string, ans onboardAnswers) []onboardCheck {
	var out []onboardCheck
	addr := net.JoinHostPort(ans.Host, strconv.Itoa(ans.Port))
	if ln, err := net.Listen("tcp", addr); err != nil {
		out = append(out, onboardCheck{"port", "fail", fmt.Sprintf("%s is not free: %v (choose another with --port)", addr, err)})
	} else {
		ln.Close()
		out = append(out, onboardCheck{"port", "ok", addr + " is free"})
	}
	out = append(out, runtimeCheck(ctx, ans))
	dir := root
	for {
		if _, err := os.Stat(dir); err == nil || filepath.Dir(dir) == dir {
			break
		}
		dir = filepath.Dir(dir)
	}
	var st syscall.Statfs_t
	if err := syscall.Statfs(dir, &st); err != nil {
		out = append(out, onboardCheck{"disk", "warn", fmt.Sprintf("free space of %s unknown: %v", dir, err)})
	} else if free := uint64(st.Bavail) * uint64(st.Bsize); free < OnboardMinFreeBytes {
		out = append(out, onboardCheck{"disk", "fail", fmt.Sprintf("%d MiB free at %s, want at least %d MiB", free>>20, dir, OnboardMinFreeBytes>>20)})
	} else {
		out = append(out, onboardCheck{"disk", "ok", fmt.Sprintf("%d MiB free at %s", free>>20, dir)})
	}
	return out
}

func runtimeCheck(ctx context.Context, ans onboardAnswers) onboardCheck {
	base := strings.TrimRight(ans.BaseURL, "/")
	probe := ""
	switch {
	case ans.Provider == "ollama":
		probe = base + "/api/tags"
	case base != "":
		probe = base + "/models"
	case ans.Provider == "openai":
		probe = "https://api.openai.com/v1/models"
	case ans.Provider == "anthropic":
		probe = "https://api.anthropic.com/v1/models"
	}
	ctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, probe, nil)
	if err != nil {
		return onboardCheck{"model runtime", "warn", fmt.Sprintf("%s: %v", probe, err)}
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return onboardCheck{"model runtime", "warn", fmt.Sprintf("%s does not answer (%v); start it before chatting", probe, err)}
	}
	resp.Body.Close()
	if resp.StatusCode >= 500 {
		return onboardCheck{"model runtime", "warn", fmt.Sprintf("%s answers %d", probe, resp.StatusCode)}
	}
	return onboardCheck{"model runtime", "ok", fmt.Sprintf("%s answers (%d)", probe, resp.StatusCode)}
}
