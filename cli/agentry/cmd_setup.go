package agentry

import (
	"bufio"
	"fmt"
	"os"
	"strconv"
	"strings"

	"github.com/spf13/cobra"
	"gopkg.in/yaml.v3"

	"github.com/agentryhq/agentry/internal/config"
)

// providerDefaults are the wizard's suggestions per provider type.
var providerDefaults = map[string]struct{ model, keyEnv string }{
	"ollama":    {model: "llama3.2"},
	"openai":    {model: "gpt-4o-mini", keyEnv: "OPENAI_API_KEY"},
	"anthropic": {model: "claude-3-5-haiku-latest", keyEnv: "ANTHROPIC_API_KEY"},
}

type setupAnswers struct {
	Host      string `json:"host"`
	Port      int    `json:"port"`
	Provider  string `json:"provider"`
	Model     string `json:"model"`
	BaseURL   string `json:"base_url,omitempty"`
	APIKeyEnv string `json:"api_key_env,omitempty"`
	// APIKeySecret names the gateway secret holding the key (onboard).
	APIKeySecret string `json:"api_key_secret,omitempty"`
	LogLevel     string `json:"log_level"`
}

func (a *App) setupCommand() *cobra.Command {
	var ans setupAnswers
	var force, yes bool
	cmd := &cobra.Command{
		Use:   "setup",
		Short: "Write the local config.yaml (interactive wizard; flags answer questions for scripts)",
		Long: `Writes config.yaml in the workspace (or AGENTRY_CONFIG_PATH) and creates the
workspace folders. In a terminal it asks for every value not given as a flag;
with --yes, or without a terminal, it uses the flags and the defaults.
An existing file is only changed with --force, and then only the keys the
wizard sets are replaced: everything else in the file is kept.`,
		Args: noArgs,
		Annotations: map[string]string{
			AnnotationHostChanging: "true",
		},
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, err := a.localConfig()
			if err != nil && !force {
				return fmt.Errorf("%w (--force rewrites the keys the wizard sets)", err)
			}
			ws, werr := config.ResolveWorkspace(a.Env)
			if werr != nil {
				return werr
			}
			path := ws.ConfigFile()
			if p, ok := a.Env(config.EnvConfigPath); ok && p != "" {
				path = p
			}
			if _, err := os.Stat(path); err == nil && !force {
				return fmt.Errorf("%s exists; run setup with --force to update it (keys the wizard does not set are kept)", path)
			}
			f := cmd.Flags()
			interactive := !yes && isTerminal(a.Stdin)
			in := bufio.NewReader(a.Stdin)
			ask := func(flag, question, def string) (string, error) {
				if f.Changed(flag) || !interactive {
					return def, nil
				}
				fmt.Fprintf(a.Stderr, "%s [%s]: ", question, def)
				line, err := in.ReadString('\n')
				if err != nil && line == "" {
					return "", fmt.Errorf("read answer: %w", err)
				}
				if v := strings.TrimSpace(line); v != "" {
					return v, nil
				}
				return def, nil
			}
			if cfg != nil {
				// Suggest what is configured now.
				if !f.Changed("host") {
					ans.Host = cfg.Server.Host
				}
				if !f.Changed("port") {
					ans.Port = cfg.Server.Port
				}
			}
			if ans.Host, err = ask("host", "Listen address (127.0.0.1 keeps the gateway local)", ans.Host); err != nil {
				return err
			}
			portText, err := ask("port", "Port", strconv.Itoa(ans.Port))
			if err != nil {
				return err
			}
			if ans.Port, err = strconv.Atoi(portText); err != nil || ans.Port < 1 || ans.Port > 65535 {
				return usagef("port %q: want 1-65535", portText)
			}
			if ans.Provider, err = ask("provider", "Default LLM provider (ollama, openai, anthropic)", ans.Provider); err != nil {
				return err
			}
			ans.Provider = strings.ToLower(ans.Provider)
			pd, ok := providerDefaults[ans.Provider]
			if !ok {
				return usagef("provider %q: use ollama, openai or anthropic", ans.Provider)
			}
			if !f.Changed("model") {
				ans.Model = pd.model
			}
			if ans.Model, err = ask("model", "Default model", ans.Model); err != nil {
				return err
			}
			if !f.Changed("api-key-env") {
				ans.APIKeyEnv = pd.keyEnv
			}
			if ans.Provider != "ollama" {
				if ans.APIKeyEnv, err = ask("api-key-env", "Environment variable holding the provider's API key", ans.APIKeyEnv); err != nil {
					return err
				}
			} else {
				ans.APIKeyEnv = ""
			}
			if ans.BaseURL == "" && ans.Provider == "ollama" {
				ans.BaseURL = "http://127.0.0.1:11434"
			}
			if ans.BaseURL, err = ask("base-url", "Provider base URL (empty: the provider's default)", ans.BaseURL); err != nil {
				return err
			}
			if err := a.writeSetup(path, ans); err != nil {
				return err
			}
			if err := ws.Ensure(); err != nil {
				return err
			}
			if a.jsonOut {
				return printValue(a.Stdout, map[string]any{"config_file": path, "workspace": ws.Root, "settings": ans})
			}
			fmt.Fprintf(a.Stdout, "Wrote %s (workspace %s).\n", path, ws.Root)
			if ans.APIKeyEnv != "" {
				fmt.Fprintf(a.Stdout, "Set %s in the gateway's environment before starting it.\n", ans.APIKeyEnv)
			}
			fmt.Fprintln(a.Stdout, "Next: start the gateway with `agentryd` (or `agentry server start`), then run `agentry doctor`.")
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&ans.Host, "host", "127.0.0.1", "address the gateway listens on (server.host)")
	f.IntVar(&ans.Port, "port", 18789, "port the gateway listens on (server.port)")
	f.StringVar(&ans.Provider, "provider", "ollama", "default LLM provider: ollama, openai or anthropic")
	f.StringVar(&ans.Model, "model", "", "default model (default: the provider's usual small model)")
	f.StringVar(&ans.BaseURL, "base-url", "", "provider base URL (default: the provider's)")
	f.StringVar(&ans.APIKeyEnv, "api-key-env", "", "environment variable holding the provider's API key (openai, anthropic)")
	f.StringVar(&ans.LogLevel, "log-level", "info", "log.level: debug, info, warn or error")
	f.BoolVar(&force, "force", false, "update an existing config.yaml (other keys are kept)")
	f.BoolVarP(&yes, "yes", "y", false, "ask nothing: use the flags and defaults")
	return cmd
}

// writeSetup sets the wizard's keys in the file and validates the result
// with the gateway's own loader before writing it.
func (a *App) writeSetup(path string, ans setupAnswers) error {
	prov := []string{"llm", "providers", ans.Provider}
	edit := func(root *yaml.Node) error {
		var err error
		set := func(path []string, v *yaml.Node) {
			if err == nil {
				_, err = config.SetPath(root, path, v)
			}
		}
		set([]string{"server", "host"}, config.StringNode(ans.Host))
		set([]string{"server", "port"}, config.ValueNode(ans.Port))
		set([]string{"llm", "default_provider"}, config.StringNode(ans.Provider))
		set(append(prov, "type"), config.StringNode(ans.Provider))
		set(append(prov, "default_model"), config.StringNode(ans.Model))
		if ans.BaseURL != "" {
			set(append(prov, "base_url"), config.StringNode(ans.BaseURL))
		} else {
			config.DeletePath(root, append(prov, "base_url"))
		}
		if ans.APIKeySecret != "" {
			set(append(prov, "api_key_secret"), config.StringNode(ans.APIKeySecret))
			config.DeletePath(root, append(prov, "api_key_env"))
		} else if ans.APIKeyEnv != "" {
			set(append(prov, "api_key_env"), config.StringNode(ans.APIKeyEnv))
		}
		set([]string{"log", "level"}, config.StringNode(ans.LogLevel))
		return err
	}
	return config.EditFile(path, edit, validConfig(path))
}

// validConfig is the check of config.EditFile: the edited text must load
// with the gateway's own loader, or nothing is written.
func validConfig(path string) func(data []byte) error {
	return func(data []byte) error {
		cfg := config.Defaults()
		if err := config.Parse(data, path, &cfg); err != nil {
			return err
		}
		if err := config.Validate(&cfg); err != nil {
			return fmt.Errorf("%s would not be valid, nothing written: %w", path, err)
		}
		return nil
	}
}
