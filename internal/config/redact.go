package config

import (
	"fmt"
	"strings"
)

// Redacted replaces secret values in API responses and logs.
const Redacted = "********"

var secretKeyParts = []string{"token", "secret", "password", "api_key", "credential"}

// IsSecretKey reports whether a key names a secret: it contains token,
// secret, password, api_key or credential (case-insensitive), or is exactly
// key, dsn or redis_url. The key may be
// a single segment or a dotted path; only the last segment decides, so that
// `credentials.provider` (a choice of vault, not a secret) stays readable
// while `llm.providers.openai.api_key` is hidden.
func IsSecretKey(key string) bool {
	if i := strings.LastIndex(key, "."); i >= 0 {
		key = key[i+1:]
	}
	k := strings.ToLower(key)
	if k == "key" || k == "dsn" || k == "redis_url" {
		// auth.keys[].key, a storage DSN and rate_limit.redis_url (they may
		// embed a password).
		return true
	}
	if strings.HasSuffix(k, "_env") || k == "api_key_secret" {
		// api_key_env / secret_env hold the NAME of a variable, api_key_secret
		// the name of a secret in the secret store: not the secret.
		return false
	}
	for _, p := range secretKeyParts {
		if strings.Contains(k, p) {
			return true
		}
	}
	return false
}

// Redact returns a deep copy of a decoded YAML/JSON tree with every non-empty
// value under a secret key replaced by Redacted.
func Redact(v any) any {
	switch t := v.(type) {
	case map[string]any:
		out := make(map[string]any, len(t))
		for k, val := range t {
			if m, ok := val.(map[string]any); ok && valuesAreSecret(k) {
				out[k] = redactAll(m)
				continue
			}
			switch val.(type) {
			case map[string]any, []any:
				out[k] = Redact(val)
				continue
			}
			if IsSecretKey(k) && !isEmpty(val) && !isTokenLimit(k, val) {
				out[k] = Redacted
				continue
			}
			if text, ok := val.(string); ok && isHeadersKey(k) {
				out[k] = RedactHeaderText(text)
				continue
			}
			out[k] = val
		}
		return out
	case []any:
		out := make([]any, len(t))
		for i, val := range t {
			out[i] = Redact(val)
		}
		return out
	default:
		return v
	}
}

// valuesAreSecret: every value under these keys is a secret whatever its
// name (an MCP server's headers and env: Authorization, GITHUB_TOKEN, ...;
// a registry's auth_headers).
func valuesAreSecret(key string) bool {
	k := strings.ToLower(key)
	return k == "headers" || k == "env" || strings.HasSuffix(k, "_headers")
}

// isTokenLimit tells a number under a key that counts tokens
// (max_tokens_per_minute, per_user_tokens_day, max_output_tokens_ceiling,
// max_build_tokens): an operator's limit, not a credential, so GET /config
// shows it (issue 43). Only a number: a string under such a key stays
// hidden, and "token" alone (bot_token) is always a credential.
func isTokenLimit(key string, val any) bool {
	switch val.(type) {
	case int, int64, uint64, float64:
	default:
		return false
	}
	k := strings.ToLower(key)
	if !strings.Contains(k, "tokens") {
		return false
	}
	for _, p := range []string{"secret", "password", "api_key", "credential"} {
		if strings.Contains(k, p) {
			return false
		}
	}
	return true
}

func redactAll(m map[string]any) map[string]any {
	out := make(map[string]any, len(m))
	for k, v := range m {
		if isEmpty(v) {
			out[k] = v
			continue
		}
		out[k] = Redacted
	}
	return out
}

func isEmpty(v any) bool {
	switch t := v.(type) {
	case nil:
		return true
	case string:
		return t == ""
	}
	return false
}

// RedactedTree renders the configuration as a generic tree with secrets hidden.
func (c *Config) RedactedTree() (map[string]any, error) {
	tree, err := ToTree(c)
	if err != nil {
		return nil, err
	}
	return Redact(tree).(map[string]any), nil
}

// isHeadersKey tells the keys holding "Name: value" header lines
// (channels.webhook.headers): every header value is a secret (they carry
// tokens), only the names are shown.
func isHeadersKey(key string) bool {
	if i := strings.LastIndex(key, "."); i >= 0 {
		key = key[i+1:]
	}
	return strings.EqualFold(key, "headers")
}

// RedactHeaderText hides every value of "Name: value" lines, keeping the
// names (and comments and blank lines); a line without a colon is hidden
// whole.
func RedactHeaderText(text string) string {
	lines := strings.Split(strings.ReplaceAll(text, "\r\n", "\n"), "\n")
	for i, line := range lines {
		t := strings.TrimSpace(line)
		if t == "" || strings.HasPrefix(t, "#") {
			continue
		}
		name, value, ok := strings.Cut(t, ":")
		switch {
		case !ok:
			lines[i] = Redacted
		case strings.TrimSpace(value) == "":
			lines[i] = strings.TrimSpace(name) + ":"
		default:
			lines[i] = strings.TrimSpace(name) + ": " + Redacted
		}
	}
	return strings.Join(lines, "\n")
}

// MergeRedactedHeaders lets a client write back header lines as it read
// them: a line of next whose value is ******** keeps the value of the same
// header (case-insensitive name) in prev.
func MergeRedactedHeaders(prev, next string) (string, error) {
	if !strings.Contains(next, Redacted) {
		return next, nil
	}
	old := map[string]string{}
	for _, line := range strings.Split(strings.ReplaceAll(prev, "\r\n", "\n"), "\n") {
		if name, value, ok := strings.Cut(strings.TrimSpace(line), ":"); ok {
			if _, seen := old[strings.ToLower(strings.TrimSpace(name))]; !seen {
				old[strings.ToLower(strings.TrimSpace(name))] = strings.TrimSpace(value)
			}
		}
	}
	lines := strings.Split(strings.ReplaceAll(next, "\r\n", "\n"), "\n")
	for i, line := range lines {
		name, value, ok := strings.Cut(strings.TrimSpace(line), ":")
		if !ok || strings.TrimSpace(value) != Redacted {
			continue
		}
		name = strings.TrimSpace(name)
		v, found := old[strings.ToLower(name)]
		if !found {
			return "", fmt.Errorf("headers: %s has the redacted value %s and no earlier value to keep", name, Redacted)
		}
		lines[i] = name + ": " + v
	}
	return strings.Join(lines, "\n"), nil
}
