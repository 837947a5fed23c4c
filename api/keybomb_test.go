package api

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/agentryhq/agentry/internal/agentdef"
)

// keyBomb is an agent definition with n extra keys, as JSON or YAML.
func keyBomb(n int, asYAML bool) string {
	var b strings.Builder
	if asYAML {
		b.WriteString("id: bomb\nllm: {provider: ollama, model: m}\n")
		for i := range n {
			fmt.Fprintf(&b, "k%06d: 1\n", i)
		}
		return b.String()
	}
	b.WriteString(`{"id":"bomb","llm":{"provider":"ollama","model":"m"}`)
	for i := range n {
		fmt.Fprintf(&b, `,"k%06d":1`, i)
	}
	return b.String() + "}"
}

// TestAgentKeyBombsAreRefusedBeforeParsing: POST /agents decoded a YAML
// mapping key against key, so 100,000 keys (1.4 MB) cost 85 s of CPU (#42).
// Over real HTTP, every form of the route (JSON object, {"definition":
// YAML}, YAML body) now answers 413 with the envelope naming the limit,
// and a definition at the limit is still created.
func TestAgentKeyBombsAreRefusedBeforeParsing(t *testing.T) {
	dir := t.TempDir()
	files := agentdef.NewFiles(dir, agentdef.NewRegistry([]string{dir}, nil))
	s := newTestServer(t, func(d *Deps) {
		d.Config.Server.MaxBodyBytes = 4 << 20
		d.Features = append(d.Features, &AgentAdminFeature{Files: files})
	})
	addr := serveLoopback(t, s)
	post := func(contentType, body string) (int, map[string]any) {
		req, _ := http.NewRequest("POST", "http://"+addr+"/api/v1/agents", strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+testKey)
		req.Header.Set("Content-Type", contentType)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var env map[string]any
		json.NewDecoder(resp.Body).Decode(&env)
		return resp.StatusCode, env
	}
	wrapped := func(yaml string) string {
		raw, _ := json.Marshal(map[string]string{"definition": yaml})
		return string(raw)
	}
	for name, c := range map[string]struct{ ct, body string }{
		"json 100k keys":         {"application/json", keyBomb(100_000, false)},
		"json 2k keys":           {"application/json", keyBomb(2_000, false)},
		"yaml body 10k keys":     {"application/yaml", keyBomb(10_000, true)},
		"wrapped yaml 5k keys":   {"application/json", wrapped(keyBomb(5_000, true))},
		"json nested 100 levels": {"application/json", `{"id":"x","a":` + strings.Repeat(`{"a":`, 100) + "1" + strings.Repeat("}", 101)},
	} {
		status, env := post(c.ct, c.body)
		msg, _ := env["error"].(string)
		if status != http.StatusRequestEntityTooLarge || env["code"] != "too_large" || env["max"] == nil || !strings.Contains(msg, "limit") {
			t.Errorf("%s: %d %v, want 413 too_large naming the limit", name, status, env)
		}
	}
	if status, env := post("application/json", keyBomb(agentdef.MaxKeys-10, false)); status != http.StatusCreated {
		t.Fatalf("a definition under the key limit: %d %v", status, env)
	}
}

// FuzzJSONShape: the bound's one pass counts exactly the keys and nesting
// encoding/json sees in valid JSON, and visits each byte once (the work
// per request is linear whatever the body).
func FuzzJSONShape(f *testing.F) {
	for _, s := range []string{`{}`, `{"a":{"b":[1,{"c":"x:{"}]}}`, `{"a\"":":"}`, `[[[[]]]]`, keyBomb(20, false)} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		keys, depth := jsonShape([]byte(s))
		var v any
		if json.Unmarshal([]byte(s), &v) != nil {
			return
		}
		wantKeys, wantDepth := countTokens(t, s)
		if keys != wantKeys || depth != wantDepth {
			t.Fatalf("%q: shape %d keys depth %d, want %d, %d", s, keys, depth, wantKeys, wantDepth)
		}
	})
}

// countTokens counts the object keys (duplicates too) and the depth of
// valid JSON with encoding/json's tokenizer.
func countTokens(t *testing.T, s string) (keys, depth int) {
	dec := json.NewDecoder(strings.NewReader(s))
	type frame struct{ object, wantKey bool }
	var stack []frame
	for {
		tok, err := dec.Token()
		if err != nil {
			return keys, depth
		}
		if d, ok := tok.(json.Delim); ok && (d == '{' || d == '[') {
			stack = append(stack, frame{object: d == '{', wantKey: d == '{'})
			depth = max(depth, len(stack))
			continue
		}
		if d, ok := tok.(json.Delim); ok && (d == '}' || d == ']') {
			stack = stack[:len(stack)-1]
		} else if n := len(stack); n > 0 && stack[n-1].object && stack[n-1].wantKey {
			keys++
			stack[n-1].wantKey = false
			continue
		}
		if n := len(stack); n > 0 && stack[n-1].object {
			stack[n-1].wantKey = true // a value ended: a key comes next
		}
	}
}
