package agentpkg

import (
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"unicode/utf8"

	"gopkg.in/yaml.v3"

	"github.com/agentryhq/agentry/internal/agentdef"
)

// BundleDirs are the folders of an agent's bundle directory
// (<agents dir>/<id>/) that a package carries.
var BundleDirs = []string{"tools", "evals", "prompts", "samples"}

// Limits of the bundled files.
const (
	MaxFileBytes  = 1 << 20
	MaxTotalBytes = 8 << 20
	MaxFiles      = 500
)

// secretKey matches definition keys whose values are never exported: the
// words the configuration API redacts, as the key or its last word
// (max_tokens is a number, not a token). Keys ending in _env name an
// environment variable and are kept.
var secretKey = regexp.MustCompile(`(^|_)(token|access_token|secret|password|passwd|api_?key|apikey|credentials?|private_key)$|secret|password|credential`)

// Export is the result of building a package.
type Export struct {
	Package *Package
	// Skipped are bundle files left out, with why (symlinks, binaries in
	// tools/, files over the limits).
	Skipped []string
}

// Build packages an agent: its definition file's YAML text and its
// bundle directory (may be absent). The package is unsigned; Sign adds a
// signature.
func Build(definitionYAML []byte, bundleDir, createdBy string) (*Export, error) {
	def, err := agentdef.Parse(definitionYAML, "definition")
	if err != nil {
		return nil, err
	}
	var tree map[string]any
	if err := yaml.Unmarshal(definitionYAML, &tree); err != nil {
		return nil, fmt.Errorf("definition: %w", err)
	}
	delete(tree, "enabled")
	redacted := []string{}
	redact(tree, "", &redacted)
	sort.Strings(redacted)
	files, skipped, err := collectFiles(bundleDir)
	if err != nil {
		return nil, err
	}
	p := &Package{Format: FormatName, FormatVersion: FormatVersion, Agent: jsonSafe(tree).(map[string]any),
		Files: files, Redacted: redacted, CreatedBy: createdBy}
	p.Requirements = requirementsOf(def, p.Agent, redacted)
	if err := p.seal(); err != nil {
		return nil, err
	}
	return &Export{Package: p, Skipped: skipped}, nil
}

// seal computes the checksum over the package as it stands (the
// signature is dropped: it would no longer match).
func (p *Package) seal() error {
	p.Checksum, p.Signature = "", nil
	obj, err := toGeneric(p)
	if err != nil {
		return err
	}
	delete(obj, "checksum")
	delete(obj, "signature")
	canon, err := marshalCanonical(obj)
	if err != nil {
		return err
	}
	p.Checksum = Checksum(canon)
	return nil
}

// Marshal renders the package as indented JSON (whitespace is not part of
// the canonical form).
func (p *Package) Marshal() ([]byte, error) {
	data, err := json.MarshalIndent(p, "", "  ")
	if err != nil {
		return nil, err
	}
	return append(data, '\n'), nil
}

// Sign verifies a package document's integrity and returns it signed with
// key (any earlier signature is replaced).
func Sign(doc []byte, key ed25519.PrivateKey) ([]byte, error) {
	p, err := Verify(doc, VerifyOptions{})
	if err != nil {
		return nil, err
	}
	canon, err := Canonical(doc)
	if err != nil {
		return nil, err
	}
	pub := key.Public().(ed25519.PublicKey)
	p.Signature = &Signature{Algorithm: "ed25519", KeyID: KeyID(pub), PublicKey: hex.EncodeToString(pub),
		Value: base64.StdEncoding.EncodeToString(ed25519.Sign(key, canon))}
	return p.Marshal()
}

// redact removes the values of keys that hold secrets, recording their
// dotted paths.
func redact(m map[string]any, prefix string, out *[]string) {
	for k, v := range m {
		path := k
		if prefix != "" {
			path = prefix + "." + k
		}
		lk := strings.ToLower(k)
		if secretKey.MatchString(lk) && !strings.HasSuffix(lk, "_env") {
			delete(m, k)
			*out = append(*out, path)
			continue
		}
		if child, ok := v.(map[string]any); ok {
			redact(child, path, out)
		}
	}
}

// jsonSafe converts YAML-decoded values (map[string]any, []any, scalars)
// into values encoding/json accepts.
func jsonSafe(v any) any {
	switch t := v.(type) {
	case map[string]any:
		out := make(map[string]any, len(t))
		for k, x := range t {
			out[k] = jsonSafe(x)
		}
		return out
	case map[any]any:
		out := make(map[string]any, len(t))
		for k, x := range t {
			out[fmt.Sprint(k)] = jsonSafe(x)
		}
		return out
	case []any:
		out := make([]any, len(t))
		for i, x := range t {
			out[i] = jsonSafe(x)
		}
		return out
	}
	return v
}

// requirementsOf lists what a definition refers to. Keys this version of
// the definition schema does not model (skills, mcp_servers, ...) are read
// from the raw tree, so packages from newer gateways still list them.
func requirementsOf(def *agentdef.Definition, tree map[string]any, redacted []string) Requirements {
	set := func(vals ...string) []string {
		seen := map[string]bool{}
		out := []string{}
		for _, v := range vals {
			if v = strings.TrimSpace(v); v != "" && !seen[v] {
				seen[v] = true
				out = append(out, v)
			}
		}
		sort.Strings(out)
		return out
	}
	r := Requirements{
		Providers: set(append([]string{def.LLM.Provider}, def.LLM.AllowedProviders...)...),
		Channels:  set(def.Channels...),
	}
	if def.Schedule != nil {
		r.Channels = set(append(r.Channels, def.Schedule.Output.Channel)...)
	}
	r.PeerAgents = set(append(names(tree["peer_agents"]), names(tree["peers"])...)...)
	r.Skills = set(names(tree["skills"])...)
	r.MCPServers = set(append(names(tree["mcp_servers"]), names(tree["mcp"])...)...)
	r.Files = set(names(tree["files"])...)
	r.KnowledgeBases = set(append(names(tree["knowledge_bases"]), names(tree["knowledge"])...)...)
	r.Secrets = set(append(names(tree["secrets"]), redacted...)...)
	return r
}

// names reads a list of strings, a list of objects with id or name, or
// the keys of a mapping.
func names(v any) []string {
	var out []string
	switch t := v.(type) {
	case []any:
		for _, x := range t {
			switch e := x.(type) {
			case string:
				out = append(out, e)
			case map[string]any:
				for _, k := range []string{"id", "name"} {
					if s, ok := e[k].(string); ok {
						out = append(out, s)
						break
					}
				}
			}
		}
	case map[string]any:
		for k := range t {
			out = append(out, k)
		}
	case string:
		out = append(out, t)
	}
	return out
}

// collectFiles reads the bundle folders. Only regular files are taken;
// tools/ takes text files only (no compiled binaries travel in a package).
func collectFiles(bundleDir string) ([]File, []string, error) {
	files := []File{}
	var skipped []string
	if bundleDir == "" {
		return files, nil, nil
	}
	total := int64(0)
	for _, top := range BundleDirs {
		root := filepath.Join(bundleDir, top)
		st, err := os.Lstat(root)
		if err != nil || !st.IsDir() {
			if err == nil {
				skipped = append(skipped, top+": not a folder")
			}
			continue
		}
		err = filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			rel, _ := filepath.Rel(bundleDir, path)
			rel = filepath.ToSlash(rel)
			if d.IsDir() {
				return nil
			}
			if !d.Type().IsRegular() {
				skipped = append(skipped, rel+": not a regular file (symlinks are never bundled)")
				return nil
			}
			if err := checkPath(rel); err != nil {
				skipped = append(skipped, rel+": "+err.Error())
				return nil
			}
			info, err := d.Info()
			if err != nil {
				return err
			}
			if info.Size() > MaxFileBytes {
				skipped = append(skipped, fmt.Sprintf("%s: %d bytes is over the %d-byte limit", rel, info.Size(), MaxFileBytes))
				return nil
			}
			data, err := os.ReadFile(path)
			if err != nil {
				return err
			}
			if top == "tools" && !isText(data) {
				skipped = append(skipped, rel+": binary content (tools/ bundles source files only)")
				return nil
			}
			if total+int64(len(data)) > MaxTotalBytes || len(files) >= MaxFiles {
				skipped = append(skipped, rel+": the package is full")
				return nil
			}
			total += int64(len(data))
			sum := sha256.Sum256(data)
			files = append(files, File{Path: rel, Size: int64(len(data)), SHA256: hex.EncodeToString(sum[:]),
				Content: base64.StdEncoding.EncodeToString(data)})
			return nil
		})
		if err != nil {
			return nil, nil, fmt.Errorf("read bundle %s: %w", root, err)
		}
	}
	sort.Slice(files, func(i, j int) bool { return files[i].Path < files[j].Path })
	return files, skipped, nil
}

func isText(b []byte) bool {
	return utf8.Valid(b) && !strings.ContainsRune(string(b), 0)
}
