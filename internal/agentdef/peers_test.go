package agentdef

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Peers are checked on load (issue 47): an unknown peer and a delegation
// cycle are errors naming the file and the line of the peers key, and the
// agents concerned are skipped; the others load.
func TestPeersCheckedOnLoad(t *testing.T) {
	dir := t.TempDir()
	write := func(name, body string) {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("lead.yaml", "id: lead\ndescription: leads\npeers: [research, writer]\n")
	write("research.yaml", "id: research\npeers: [fact]\n")
	write("fact.yaml", "id: fact\n")
	write("writer.yaml", "id: writer\n")
	write("ghost.yaml", "id: ghost\nname: g\n\npeers: [nobody]\n")
	write("a.yaml", "id: a\npeers: [b]\n")
	write("b.yaml", "id: b\npeers: [a]\n")
	write("c.yaml", "id: c\npeers: [a]\n")
	r := NewRegistry([]string{dir}, nil)
	var msgs []string
	for _, e := range r.LoadErrors() {
		msgs = append(msgs, e.Error())
	}
	all := strings.Join(msgs, "\n")
	for _, want := range []string{
		filepath.Join(dir, "ghost.yaml") + `:4: peers: unknown peer "nobody"`,
		filepath.Join(dir, "a.yaml") + ":2: peers: delegation cycle a -> b -> a",
		filepath.Join(dir, "b.yaml") + ":2: peers: delegation cycle a -> b -> a",
		filepath.Join(dir, "c.yaml") + `:2: peers: peer "a" was skipped`,
	} {
		if !strings.Contains(all, want) {
			t.Errorf("load errors lack %q:\n%s", want, all)
		}
	}
	for _, id := range []string{"lead", "research", "fact", "writer"} {
		if _, ok := r.Get(id); !ok {
			t.Errorf("%s not loaded", id)
		}
	}
	for _, id := range []string{"ghost", "a", "b", "c"} {
		if _, ok := r.Get(id); ok {
			t.Errorf("%s loaded despite its peers", id)
		}
	}
}

func TestPeersOwnListChecked(t *testing.T) {
	for body, want := range map[string]string{
		"id: a\npeers: [a]\n":       "its own peer",
		"id: a\npeers: [b, b]\n":    "listed twice",
		"id: a\npeers: [\"B C\"]\n": "not an agent id",
	} {
		_, err := Parse([]byte(body), "a.yaml")
		if err == nil || !strings.Contains(err.Error(), "a.yaml:2: peers: ") || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: %v", body, err)
		}
	}
	if n, ok := PeerOfTool("ask_writer"); !ok || n != "writer" {
		t.Errorf("PeerOfTool: %q %v", n, ok)
	}
}
