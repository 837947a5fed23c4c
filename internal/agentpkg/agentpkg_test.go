package agentpkg

import (
	"bytes"
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite testdata/ (the published example and test vectors)")

// The published test key: RFC 8032 section 7.1, test 1. Never use it for
// anything but tests; its private half is public.
const (
	testSeedHex   = "9d61b19deffd5a60ba844af492ec2cc44449c5697b326919703bac031cae7f60"
	testPublicHex = "d75a980182b10ab7d54bfed3c964073a0ee172f3daa62325af021a68f707511a"
	// otherSeedHex is RFC 8032 test 2: "another key".
	otherSeedHex = "4ccd089b28ff96da9db6c346ec114e0f5b8a319f35aba624da8cf6ed4fb8a6fb"
)

func testKey(t *testing.T, seed string) ed25519.PrivateKey {
	t.Helper()
	k, err := ParsePrivateKey(seed)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

// vector is one entry of testdata/vectors.json.
type vector struct {
	File string `json:"file"`
	// TrustedKey, when set, is the only trusted signer.
	TrustedKey string `json:"trusted_key,omitempty"`
	// CanonicalSHA256 is the SHA-256 of the canonical bytes (hex).
	CanonicalSHA256 string `json:"canonical_sha256,omitempty"`
	// Expect is "ok" or the Kind of the failure.
	Expect string `json:"expect"`
	Why    string `json:"why"`
}

func buildExample(t *testing.T) []byte {
	t.Helper()
	dir := filepath.Join("testdata", "example-agent")
	def, err := os.ReadFile(filepath.Join(dir, "triage.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	ex, err := Build(def, dir, "agentry 1.0.0")
	if err != nil {
		t.Fatal(err)
	}
	doc, err := ex.Package.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	signed, err := Sign(doc, testKey(t, testSeedHex))
	if err != nil {
		t.Fatal(err)
	}
	return signed
}

// mutate decodes a document, changes it and re-seals the checksum (so the
// failure tested is the intended one, not the checksum).
func mutate(t *testing.T, doc []byte, change func(obj map[string]any), reseal bool) []byte {
	t.Helper()
	obj, err := decodeObject(doc)
	if err != nil {
		t.Fatal(err)
	}
	change(obj)
	if reseal {
		delete(obj, "signature")
		canon, err := Canonical(mustJSON(t, obj))
		if err != nil {
			t.Fatal(err)
		}
		obj["checksum"] = Checksum(canon)
	}
	out, err := json.MarshalIndent(obj, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	return append(out, '\n')
}

func mustJSON(t *testing.T, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// writeVectors regenerates testdata (go test -run TestVectors -update).
func writeVectors(t *testing.T) {
	example := buildExample(t)
	other, err := Sign(example, testKey(t, otherSeedHex))
	if err != nil {
		t.Fatal(err)
	}
	tampered := bytes.Replace(example, []byte("urgency (low, normal,"), []byte("urgency (low, normaL,"), 1)
	files := map[string][]byte{
		"example.agentry-agent.json":          example,
		"tampered.agentry-agent.json":         tampered,
		"other-key.agentry-agent.json":        other,
		"format-version-2.agentry-agent.json": mutate(t, example, func(o map[string]any) { o["format_version"] = 2 }, true),
		"path-escape.agentry-agent.json": mutate(t, example, func(o map[string]any) {
			f := o["files"].([]any)[0].(map[string]any)
			f["path"] = "tools/../../../.bashrc"
		}, true),
		"unsigned.agentry-agent.json": mutate(t, example, func(map[string]any) {}, true),
	}
	for name, data := range files {
		if err := os.WriteFile(filepath.Join("testdata", name), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	canon := func(doc []byte) string {
		c, err := Canonical(doc)
		if err != nil {
			t.Fatal(err)
		}
		sum := sha256.Sum256(c)
		return hex.EncodeToString(sum[:])
	}
	vectors := []vector{
		{File: "example.agentry-agent.json", CanonicalSHA256: canon(example), Expect: "ok", Why: "signed by the test key, checked without a trusted key"},
		{File: "example.agentry-agent.json", TrustedKey: testPublicHex, CanonicalSHA256: canon(example), Expect: "ok", Why: "signed by the trusted key"},
		{File: "tampered.agentry-agent.json", Expect: KindChecksum, Why: "one byte of the system prompt changed after signing"},
		{File: "other-key.agentry-agent.json", TrustedKey: testPublicHex, CanonicalSHA256: canon(other), Expect: KindUntrustedKey, Why: "a valid signature by another key"},
		{File: "unsigned.agentry-agent.json", TrustedKey: testPublicHex, CanonicalSHA256: canon(files["unsigned.agentry-agent.json"]), Expect: KindUnsigned, Why: "no signature while a key is trusted"},
		{File: "format-version-2.agentry-agent.json", Expect: KindFormatVersion, Why: "format_version 2 is unknown to this reader"},
		{File: "path-escape.agentry-agent.json", Expect: KindUnsafePath, Why: "a bundled file path climbs out of the bundle"},
	}
	data, _ := json.MarshalIndent(vectors, "", "  ")
	if err := os.WriteFile(filepath.Join("testdata", "vectors.json"), append(data, '\n'), 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestVectors verifies every checked-in test vector; docs/packages.md
// publishes them.
func TestVectors(t *testing.T) {
	if *update {
		writeVectors(t)
	}
	data, err := os.ReadFile(filepath.Join("testdata", "vectors.json"))
	if err != nil {
		t.Fatal(err)
	}
	var vectors []vector
	if err := json.Unmarshal(data, &vectors); err != nil {
		t.Fatal(err)
	}
	if len(vectors) < 7 {
		t.Fatalf("only %d vectors", len(vectors))
	}
	for _, v := range vectors {
		doc, err := os.ReadFile(filepath.Join("testdata", v.File))
		if err != nil {
			t.Fatal(err)
		}
		opts := VerifyOptions{}
		if v.TrustedKey != "" {
			k, err := ParsePublicKey(v.TrustedKey)
			if err != nil {
				t.Fatal(err)
			}
			opts.TrustedKeys = []ed25519.PublicKey{k}
		}
		_, err = Verify(doc, opts)
		got := "ok"
		if err != nil {
			got = KindOf(err)
		}
		if got != v.Expect {
			t.Errorf("%s (%s): got %q (%v), want %q", v.File, v.Why, got, err, v.Expect)
		}
		if v.CanonicalSHA256 != "" {
			c, err := Canonical(doc)
			if err != nil {
				t.Fatal(err)
			}
			if sum := sha256.Sum256(c); hex.EncodeToString(sum[:]) != v.CanonicalSHA256 {
				t.Errorf("%s: canonical bytes changed", v.File)
			}
		}
	}
	// The example is what Build makes today (deterministic signatures).
	want, _ := os.ReadFile(filepath.Join("testdata", "example.agentry-agent.json"))
	if got := buildExample(t); !bytes.Equal(got, want) {
		t.Errorf("Build no longer reproduces testdata/example.agentry-agent.json; run go test -run TestVectors -update and review the diff")
	}
	// docs/packages.md publishes the same example.
	page, err := os.ReadFile(filepath.Join("..", "..", "docs", "packages.md"))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(page, bytes.TrimSpace(want)) {
		t.Errorf("docs/packages.md does not contain testdata/example.agentry-agent.json verbatim")
	}
}

func TestBuildRedactsAndLists(t *testing.T) {
	var p Package
	if err := json.Unmarshal(buildExample(t), &p); err != nil {
		t.Fatal(err)
	}
	if _, ok := p.Agent["api_key"]; ok {
		t.Fatal("api_key was exported")
	}
	if _, ok := p.Agent["enabled"]; ok {
		t.Fatal("enabled was exported")
	}
	if !slices.Equal(p.Redacted, []string{"api_key"}) {
		t.Fatalf("redacted = %v", p.Redacted)
	}
	r := p.Requirements
	for name, got := range map[string][]string{"providers": r.Providers, "channels": r.Channels, "skills": r.Skills,
		"mcp": r.MCPServers, "kb": r.KnowledgeBases, "files": r.Files, "peers": r.PeerAgents, "secrets": r.Secrets} {
		if len(got) != 1 {
			t.Errorf("%s = %v", name, got)
		}
	}
	var paths []string
	for _, f := range p.Files {
		paths = append(paths, f.Path)
	}
	want := []string{"evals/triage.json", "prompts/classify.md", "samples/invoice.txt", "tools/lookup.py"}
	if !slices.Equal(paths, want) {
		t.Fatalf("files = %v", paths)
	}
}

func TestBuildSkipsUnsafeFiles(t *testing.T) {
	dir := t.TempDir()
	os.MkdirAll(filepath.Join(dir, "tools"), 0o755)
	os.WriteFile(filepath.Join(dir, "tools", "ok.sh"), []byte("echo ok\n"), 0o644)
	os.WriteFile(filepath.Join(dir, "tools", "blob.bin"), []byte{0x7f, 'E', 'L', 'F', 0, 1}, 0o755)
	os.WriteFile(filepath.Join(t.TempDir(), "secret"), []byte("x"), 0o600)
	os.Symlink("/etc/passwd", filepath.Join(dir, "tools", "passwd"))
	ex, err := Build([]byte("id: a\nllm: {provider: p}\n"), dir, "")
	if err != nil {
		t.Fatal(err)
	}
	if len(ex.Package.Files) != 1 || ex.Package.Files[0].Path != "tools/ok.sh" {
		t.Fatalf("files = %+v", ex.Package.Files)
	}
	joined := strings.Join(ex.Skipped, "\n")
	for _, want := range []string{"tools/blob.bin: binary", "tools/passwd: not a regular file"} {
		if !strings.Contains(joined, want) {
			t.Errorf("skipped %q missing in:\n%s", want, joined)
		}
	}
}

// TestTamperEveryByteOfTheContent: changing any single byte of a signed
// package's values is caught (checksum, signature or JSON syntax).
func TestTamperIsCaught(t *testing.T) {
	doc := buildExample(t)
	trusted := VerifyOptions{TrustedKeys: []ed25519.PublicKey{testKey(t, testSeedHex).Public().(ed25519.PublicKey)}}
	if _, err := Verify(doc, trusted); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < len(doc); i += 7 {
		c := doc[i]
		if c == ' ' || c == '\n' {
			continue // whitespace is not content
		}
		bad := bytes.Clone(doc)
		bad[i] ^= 0x01
		if _, err := Verify(bad, trusted); err == nil {
			t.Fatalf("flipping byte %d (%q) went unnoticed", i, c)
		}
	}
}

func TestSignatureByAnotherKeyAndBadValue(t *testing.T) {
	doc := buildExample(t)
	obj, _ := decodeObject(doc)
	sig := obj["signature"].(map[string]any)
	sig["key_id"] = "0000000000000000"
	if _, err := Verify(mustJSON(t, obj), VerifyOptions{}); KindOf(err) != KindSignature {
		t.Fatalf("wrong key id: %v", err)
	}
}
