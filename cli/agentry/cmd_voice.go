package agentry

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"gopkg.in/yaml.v3"

	"github.com/agentryhq/agentry/internal/config"
)

// voiceCommand is `agentry voice setup` (docs/voice.md): check the realtime
// provider by minting a client secret with the key, then write the voice
// section of the local config.yaml atomically. It changes this machine, so
// it is refused for remote targets (spec: "mutating voice setup");
// --dry-run only checks, and runs anywhere.
func (a *App) voiceCommand() *cobra.Command {
	var provider, model, baseURL, keyEnv string
	var seconds int
	var dryRun, skipCheck bool
	setup := &cobra.Command{
		Use:   "setup",
		Short: "Check a realtime voice provider and write the voice section of config.yaml",
		Args:  noArgs,
		Annotations: map[string]string{
			AnnotationHostChanging: "unless-dry-run",
		},
		RunE: func(cmd *cobra.Command, _ []string) error {
			if model == "" {
				return usagef("voice setup needs --model (e.g. gpt-realtime)")
			}
			base := strings.TrimRight(baseURL, "/")
			if base == "" {
				base = "https://api.openai.com/v1"
			}
			checked := false
			if !skipCheck {
				key := ""
				if keyEnv != "" {
					key = os.Getenv(keyEnv)
					if key == "" {
						return fmt.Errorf("%s is empty: export the provider key in it (or --skip-check)", keyEnv)
					}
				}
				if !a.jsonOut {
					fmt.Fprintf(a.Stderr, "Checking %s with model %s...\n", base, model)
				}
				if err := checkRealtime(cmd.Context(), base, key, model); err != nil {
					return fmt.Errorf("the voice provider check failed, nothing written: %w", err)
				}
				checked = true
			}
			ws, err := config.ResolveWorkspace(a.Env)
			if err != nil {
				return err
			}
			path := ws.ConfigFile()
			if p, ok := a.Env(config.EnvConfigPath); ok && p != "" {
				path = p
			}
			if !dryRun {
				if err := writeVoice(path, provider, model, baseURL, keyEnv, seconds); err != nil {
					return err
				}
			}
			if a.jsonOut {
				return printValue(a.Stdout, map[string]any{"config": path, "provider": provider, "model": model,
					"base_url": base, "checked": checked, "written": !dryRun})
			}
			if dryRun {
				fmt.Fprintf(a.Stdout, "Voice provider %s (%s) answers; nothing written (--dry-run).\n", base, model)
				return nil
			}
			fmt.Fprintf(a.Stdout, "Voice section written to %s (provider %s, model %s). Restart the gateway to use it.\n", path, provider, model)
			return nil
		},
	}
	f := setup.Flags()
	f.StringVar(&provider, "provider", "openai", "provider name (ledger and costs.pricing <provider>/<model>)")
	f.StringVar(&model, "model", "", "realtime model, e.g. gpt-realtime")
	f.StringVar(&baseURL, "base-url", "", "API root of an OpenAI-Realtime-compatible provider (default https://api.openai.com/v1)")
	f.StringVar(&keyEnv, "api-key-env", "OPENAI_API_KEY", "environment variable holding the provider key (its name is written, never the key)")
	f.IntVar(&seconds, "max-session-seconds", 0, "session cap (default 300, at most 600)")
	f.BoolVar(&dryRun, "dry-run", false, "check the provider only; write nothing")
	f.BoolVar(&skipCheck, "skip-check", false, "write without checking the provider")
	return group("voice", "Realtime voice", setup)
}

// checkRealtime mints a client secret (POST /realtime/client_secrets): it
// proves the address, the key and the model at once.
func checkRealtime(ctx context.Context, base, key, model string) error {
	ctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	body, _ := json.Marshal(map[string]any{"expires_after": map[string]any{"anchor": "created_at", "seconds": 10},
		"session": map[string]any{"type": "realtime", "model": model}})
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, base+"/realtime/client_secrets", bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return fmt.Errorf("%s is not reachable: %v", base, err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	if resp.StatusCode != http.StatusOK {
		var e struct {
			Error struct {
				Message string `json:"message"`
			} `json:"error"`
		}
		json.Unmarshal(raw, &e)
		return fmt.Errorf("%s answered %d %s", base, resp.StatusCode, strings.TrimSpace(e.Error.Message))
	}
	var ok struct {
		Value string `json:"value"`
	}
	if json.Unmarshal(raw, &ok) != nil || ok.Value == "" {
		return fmt.Errorf("%s did not answer with a client secret", base)
	}
	return nil
}

// writeVoice sets the voice keys in config.yaml (other keys kept) and
// validates the result with the gateway's own loader before the atomic
// replace.
func writeVoice(path, provider, model, baseURL, keyEnv string, seconds int) error {
	edit := func(root *yaml.Node) error {
		var err error
		set := func(key string, v *yaml.Node) {
			if err == nil {
				_, err = config.SetPath(root, []string{"voice", key}, v)
			}
		}
		set("provider", config.StringNode(provider))
		set("model", config.StringNode(model))
		if baseURL != "" {
			set("base_url", config.StringNode(baseURL))
		} else {
			config.DeletePath(root, []string{"voice", "base_url"})
		}
		if keyEnv != "" {
			set("api_key_env", config.StringNode(keyEnv))
		}
		if seconds > 0 {
			set("max_session_seconds", config.ValueNode(seconds))
		}
		return err
	}
	return config.EditFile(path, edit, validConfig(path))
}
