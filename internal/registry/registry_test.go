package registry

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// tarGz builds an archive from name -> content ("" content with a name
// ending in / is a folder; a "->" in the name makes a symlink).
func tarGz(t *testing.T, files map[string]string) []byte {
	t.Helper()
	var b bytes.Buffer
	gz := gzip.NewWriter(&b)
	tw := tar.NewWriter(gz)
	for name, content := range files {
		if target, link, ok := strings.Cut(name, "->"); ok {
			tw.WriteHeader(&tar.Header{Name: target, Linkname: link, Typeflag: tar.TypeSymlink})
			continue
		}
		tw.WriteHeader(&tar.Header{Name: name, Mode: 0o644, Size: int64(len(content)), Typeflag: tar.TypeReg})
		tw.Write([]byte(content))
	}
	tw.Close()
	gz.Close()
	return b.Bytes()
}

func example(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "agentpkg", "testdata", "example.agentry-agent.json"))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func serve(t *testing.T, key ed25519.PrivateKey, archives map[string][]byte) (string, string) {
	t.Helper()
	dir := t.TempDir()
	for name, data := range archives {
		os.WriteFile(filepath.Join(dir, name), data, 0o644)
	}
	ts := httptest.NewServer(&Server{Dir: dir, Key: key})
	t.Cleanup(ts.Close)
	return ts.URL, dir
}

func TestSignedRegistryRoundTrip(t *testing.T) {
	pub, priv, _ := ed25519.GenerateKey(rand.Reader)
	arch := tarGz(t, map[string]string{"triage.agentry-agent.json": example(t), "README.md": "hi"})
	base, dir := serve(t, priv, map[string][]byte{
		"triage-1.0.0.tar.gz": arch, "triage-1.2.0.tar.gz": arch, "triage-2.0.0-rc.1.tar.gz": arch, "notes.txt": []byte("x"),
	})
	src := Source{ID: "local", Type: TypeAgentry, BaseURL: base, SigningKey: pub}
	f := NewFetcher()
	ctx := context.Background()
	ref, err := ParseRef("local/triage", []Source{src})
	if err != nil {
		t.Fatal(err)
	}
	res, err := f.Resolve(ctx, ref, []Source{src})
	if err != nil {
		t.Fatal(err)
	}
	if res.Version.Version != "1.2.0" {
		t.Fatalf("picked %s, want the newest release 1.2.0", res.Version.Version)
	}
	data, err := f.Download(ctx, res)
	if err != nil || !res.Signed {
		t.Fatalf("download: %v signed=%v", err, res.Signed)
	}
	dest := filepath.Join(t.TempDir(), "out", "triage")
	u, err := Unpack(data, dest, false, false, nil)
	if err != nil || len(u.Packages) != 1 {
		t.Fatalf("unpack: %v %+v", err, u)
	}
	if _, err := Unpack(data, dest, false, false, nil); err == nil {
		t.Fatal("second unpack without force")
	}
	if _, err := Unpack(data, dest, true, false, nil); err != nil {
		t.Fatal(err)
	}

	// Another key: refused.
	other, _, _ := ed25519.GenerateKey(rand.Reader)
	src2 := src
	src2.SigningKey = other
	res2, _ := f.Resolve(ctx, Ref{Slug: "triage", Version: "1.0.0"}, []Source{src2})
	if _, err := f.Download(ctx, res2); err == nil || !strings.Contains(err.Error(), "does not verify") {
		t.Fatalf("other key: %v", err)
	}
	// Tampered archive on disk after the index was made: checksum.
	res3, _ := f.Resolve(ctx, Ref{Slug: "triage", Version: "1.0.0"}, []Source{src})
	tampered := append([]byte(nil), arch...)
	tampered[len(tampered)-5] ^= 1
	os.WriteFile(filepath.Join(dir, "triage-1.0.0.tar.gz"), tampered, 0o644)
	if _, err := f.Download(ctx, res3); err == nil || !strings.Contains(err.Error(), "checksum") {
		t.Fatalf("tampered: %v", err)
	}
}

func TestUnsignedRegistryRefusedWithKey(t *testing.T) {
	pub, _, _ := ed25519.GenerateKey(rand.Reader)
	base, _ := serve(t, nil, map[string][]byte{"a-1.0.0.tar.gz": tarGz(t, map[string]string{"x.txt": "x"})})
	src := Source{ID: "r", Type: TypeAgentry, BaseURL: base, SigningKey: pub}
	f := NewFetcher()
	res, err := f.Resolve(context.Background(), Ref{Slug: "a"}, []Source{src})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Download(context.Background(), res); err == nil || !strings.Contains(err.Error(), "unsigned") {
		t.Fatalf("unsigned: %v", err)
	}
}

func TestIndexErrorsNameTheCause(t *testing.T) {
	html := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html")
		w.Write([]byte("<!doctype html><html>login</html>"))
	}))
	defer html.Close()
	missing := httptest.NewServer(http.NotFoundHandler())
	defer missing.Close()
	f := NewFetcher()
	for url, want := range map[string]string{html.URL: "HTML page", missing.URL: "HTTP 404"} {
		_, err := f.Index(context.Background(), Source{ID: "x", BaseURL: url})
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v, want %q", url, err, want)
		}
	}
}

func TestUnpackRefusesEscapesAndLinks(t *testing.T) {
	for name, files := range map[string]map[string]string{
		"escape":  {"../evil.sh": "x"},
		"abs":     {"/etc/passwd": "x"},
		"symlink": {"link->/etc/passwd": ""},
		"badpkg":  {"a.agentry-agent.json": `{"format":"agentry-agent-package","format_version":2}`},
	} {
		dest := filepath.Join(t.TempDir(), "pkg")
		if _, err := Unpack(tarGz(t, files), dest, false, false, nil); err == nil {
			t.Errorf("%s: accepted", name)
		}
		if entries, _ := os.ReadDir(filepath.Dir(dest)); len(entries) != 0 {
			t.Errorf("%s: wrote %v", name, entries)
		}
	}
	if _, err := Unpack([]byte("<html>"), filepath.Join(t.TempDir(), "x"), false, false, nil); err == nil {
		t.Error("HTML accepted as an archive")
	}
}

func TestParseArchiveNameAndRefs(t *testing.T) {
	for name, want := range map[string]string{"my-agent-1.2.0.tar.gz": "my-agent 1.2.0", "a-0.1.0-beta.2.tar.gz": "a 0.1.0-beta.2", "x-1.0.tar.gz": "", "x.tar.gz": ""} {
		s, v, ok := ParseArchiveName(name)
		got := ""
		if ok {
			got = s + " " + v
		}
		if got != want {
			t.Errorf("%s: %q want %q", name, got, want)
		}
	}
	srcs := []Source{{ID: "corp"}}
	for arg, want := range map[string]Ref{
		"corp/triage@1.0.0": {Registry: "corp", Slug: "triage", Version: "1.0.0"},
		"triage":            {Slug: "triage"},
		"acme/agents":       {Owner: "acme", Repo: "agents"},
	} {
		got, err := ParseRef(arg, srcs)
		if err != nil || got != want {
			t.Errorf("%s: %+v %v", arg, got, err)
		}
	}
	if _, err := ParseRef("a/b/c", srcs); err == nil {
		t.Error("a/b/c accepted")
	}
}
