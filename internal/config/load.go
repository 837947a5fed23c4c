package config

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"strconv"
	"strings"

	"github.com/sethvargo/go-envconfig"
	"gopkg.in/yaml.v3"
)

// EnvPrefix starts every environment override.
const EnvPrefix = "AGENTRY_"

// Environment variables that are not key overrides.
const (
	EnvConfigPath     = "AGENTRY_CONFIG_PATH"
	EnvWorkspace      = "AGENTRY_WORKSPACE"
	EnvUpdateManifest = "AGENTRY_UPDATE_MANIFEST"
)

// Loaded is a configuration together with where it came from.
type Loaded struct {
	Config
	// Path is the config file that was read, or "" when none was found.
	Path string
	// Workspace is the resolved workspace layout.
	Workspace Workspace
	// StartDir is the working directory at load time; relative agent_dirs,
	// skill_dirs and plugin_dirs resolve from it.
	StartDir string
}

// Env is how the loader reads the environment; tests pass a map.
type Env func(key string) (string, bool)

// OSEnv reads the process environment.
func OSEnv(key string) (string, bool) { return os.LookupEnv(key) }

// MapEnv adapts a map for tests.
func MapEnv(m map[string]string) Env {
	return func(k string) (string, bool) { v, ok := m[k]; return v, ok }
}

// Load finds config.yaml, parses it over the defaults, applies AGENTRY_*
// overrides and validates the result. Nothing is half-applied: on any error
// the caller gets no configuration.
func Load(ctx context.Context, env Env) (*Loaded, error) {
	if env == nil {
		env = OSEnv
	}
	startDir, err := os.Getwd()
	if err != nil {
		return nil, fmt.Errorf("read working directory: %w", err)
	}
	ws, err := ResolveWorkspace(env)
	if err != nil {
		return nil, err
	}
	path, err := FindFile(env, startDir, ws)
	if err != nil {
		return nil, err
	}
	cfg := Defaults()
	if path != "" {
		data, err := os.ReadFile(path)
		if err != nil {
			return nil, fmt.Errorf("read config %s: %w", path, err)
		}
		if err := Parse(data, path, &cfg); err != nil {
			return nil, err
		}
	}
	if err := ApplyEnv(ctx, &cfg, env); err != nil {
		return nil, err
	}
	if v, ok := env(EnvUpdateManifest); ok && v != "" {
		cfg.Updates.ManifestURL = v
	}
	normalize(&cfg)
	if err := Validate(&cfg); err != nil {
		if path != "" {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		return nil, err
	}
	l := &Loaded{Config: cfg, Path: path, Workspace: ws, StartDir: startDir}
	l.AgentDirs = resolveDirs(startDir, cfg.AgentDirs)
	l.SkillDirs = resolveDirs(startDir, cfg.SkillDirs)
	l.PluginDirs = resolveDirs(startDir, cfg.PluginDirs)
	return l, nil
}

// FindFile applies the search order: AGENTRY_CONFIG_PATH (which must exist),
// then ./config.yaml, then <workspace>/config.yaml, then the legacy flat
// directory. It returns "" when there is no file at all (a fresh install).
func FindFile(env Env, startDir string, ws Workspace) (string, error) {
	if p, ok := env(EnvConfigPath); ok && p != "" {
		if _, err := os.Stat(p); err != nil {
			return "", fmt.Errorf("%s=%s: %w", EnvConfigPath, p, err)
		}
		return p, nil
	}
	candidates := []string{filepath.Join(startDir, "config.yaml"), ws.ConfigFile()}
	if ws.LegacyDir != "" {
		candidates = append(candidates, filepath.Join(ws.LegacyDir, "config.yaml"))
	}
	for _, c := range candidates {
		if st, err := os.Stat(c); err == nil && !st.IsDir() {
			return c, nil
		}
	}
	return "", nil
}

// Parse decodes YAML over cfg. Errors name the file, the line and the key.
func Parse(data []byte, file string, cfg *Config) error {
	if len(bytes.TrimSpace(data)) == 0 {
		return nil
	}
	var root yaml.Node
	if err := yaml.Unmarshal(data, &root); err != nil {
		return fmt.Errorf("%s: %w", file, err)
	}
	if err := root.Decode(cfg); err != nil {
		return describeYAMLError(err, file, &root)
	}
	if bad := nonIntegers(&root, reflect.TypeOf(cfg), ""); len(bad) > 0 {
		return fmt.Errorf("%s: %s", file, strings.Join(bad, "; "))
	}
	return nil
}

var yamlLineRe = regexp.MustCompile(`line (\d+): (.*)`)

// describeYAMLError rewrites yaml.v3's "line N: cannot unmarshal ..." into
// "file:N: key.path: cannot unmarshal ...".
func describeYAMLError(err error, file string, root *yaml.Node) error {
	var te *yaml.TypeError
	if !errors.As(err, &te) {
		return fmt.Errorf("%s: %w", file, err)
	}
	keys := map[int]string{}
	indexKeys(root, "", keys)
	msgs := make([]string, 0, len(te.Errors))
	for _, e := range te.Errors {
		m := yamlLineRe.FindStringSubmatch(e)
		if m == nil {
			msgs = append(msgs, fmt.Sprintf("%s: %s", file, e))
			continue
		}
		line, _ := strconv.Atoi(m[1])
		if key := keys[line]; key != "" {
			msgs = append(msgs, fmt.Sprintf("%s:%d: %s: %s", file, line, key, m[2]))
		} else {
			msgs = append(msgs, fmt.Sprintf("%s:%d: %s", file, line, m[2]))
		}
	}
	return errors.New(strings.Join(msgs, "; "))
}

// indexKeys records, for each line, the dotted key whose value starts there.
func indexKeys(n *yaml.Node, prefix string, out map[int]string) {
	switch n.Kind {
	case yaml.DocumentNode:
		for _, c := range n.Content {
			indexKeys(c, prefix, out)
		}
	case yaml.MappingNode:
		for i := 0; i+1 < len(n.Content); i += 2 {
			k, v := n.Content[i], n.Content[i+1]
			path := k.Value
			if prefix != "" {
				path = prefix + "." + k.Value
			}
			out[k.Line] = path
			if v.Line != k.Line {
				out[v.Line] = path
			}
			indexKeys(v, path, out)
		}
	case yaml.SequenceNode:
		for i, c := range n.Content {
			path := fmt.Sprintf("%s[%d]", prefix, i)
			if _, ok := out[c.Line]; !ok {
				out[c.Line] = path
			}
			indexKeys(c, path, out)
		}
	}
}

// ApplyEnv applies AGENTRY_<KEY_PATH> overrides: typed fields through
// go-envconfig, entries of keyed maps (llm.providers.<id>, costs.pricing)
// by matching existing ids. A value that does not parse is an error naming
// the variable.
func ApplyEnv(ctx context.Context, cfg *Config, env Env) error {
	var last string
	recordKey := envconfig.MutatorFunc(func(_ context.Context, _, resolvedKey, _, current string) (string, bool, error) {
		last = resolvedKey
		return current, false, nil
	})
	err := envconfig.ProcessWith(ctx, &envconfig.Config{
		Target:           cfg,
		Lookuper:         envconfig.PrefixLookuper(EnvPrefix, lookuper(env)),
		DefaultOverwrite: true,
		Mutators:         []envconfig.Mutator{recordKey},
	})
	if err != nil {
		if last != "" {
			v, _ := env(last)
			return fmt.Errorf("environment variable %s=%q: %s", last, v, rootCause(err))
		}
		return fmt.Errorf("environment overrides: %w", err)
	}
	if err := applyJSONEnv(cfg, env); err != nil {
		return err
	}
	return applyMapEnv(cfg, env)
}

func rootCause(err error) string {
	for {
		next := errors.Unwrap(err)
		if next == nil {
			return err.Error()
		}
		err = next
	}
}

type envLookuper struct{ env Env }

func (l envLookuper) Lookup(key string) (string, bool) { return l.env(key) }

func lookuper(env Env) envconfig.Lookuper { return envLookuper{env} }

// resolveDirs makes relative directories absolute from the startup directory.
func resolveDirs(start string, dirs []string) []string {
	out := make([]string, 0, len(dirs))
	for _, d := range dirs {
		if d == "" {
			continue
		}
		if strings.HasPrefix(d, "~/") {
			if home, err := os.UserHomeDir(); err == nil {
				d = filepath.Join(home, d[2:])
			}
		}
		if !filepath.IsAbs(d) {
			d = filepath.Join(start, d)
		}
		out = append(out, filepath.Clean(d))
	}
	return out
}

// normalize fills values that depend on other values.
func normalize(cfg *Config) {
	for id, p := range cfg.LLM.Providers {
		if p.Type == "" {
			switch id {
			case "ollama", "openai", "anthropic":
				p.Type = id
			}
		}
		if p.Type == "ollama" && p.BaseURL == "" {
			p.BaseURL = "http://127.0.0.1:11434"
		}
		if p.Type == "ollama" {
			p.Local = p.Local || isLoopbackURL(p.BaseURL)
		}
		cfg.LLM.Providers[id] = p
	}
	if cfg.Channels.Webhook.Method == "" {
		cfg.Channels.Webhook.Method = "POST"
	}
	cfg.Log.Level = strings.ToLower(cfg.Log.Level)
	cfg.Log.Format = strings.ToLower(cfg.Log.Format)
}

func isLoopbackURL(u string) bool {
	return strings.Contains(u, "://127.") || strings.Contains(u, "://localhost") || strings.Contains(u, "://[::1]")
}
