package knowledge

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/agentryhq/agentry/internal/config"
	"github.com/agentryhq/agentry/internal/costs"
	"github.com/agentryhq/agentry/internal/llm"
	"github.com/agentryhq/agentry/internal/netguard"
	vsqlite "github.com/agentryhq/agentry/internal/vector/sqlite"
	"github.com/agentryhq/agentry/models"
	"github.com/agentryhq/agentry/workflows"
)

// fakeEmbedder embeds words into a bag-of-words hash vector and counts
// calls by call id.
type fakeEmbedder struct {
	mu     sync.Mutex
	calls  map[string]int
	texts  int
	refuse bool
	dims   int
}

func (f *fakeEmbedder) Model() string { return "fake-embed" }

func (f *fakeEmbedder) Embed(_ context.Context, texts []string, meta llm.CallMeta) ([][]float32, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.refuse {
		return nil, fmt.Errorf("embedding refused: %w", costs.ErrBudgetExceeded)
	}
	if f.calls == nil {
		f.calls = map[string]int{}
	}
	f.calls[meta.CallID]++
	f.texts += len(texts)
	out := make([][]float32, len(texts))
	for i, t := range texts {
		v := make([]float32, 64)
		for _, w := range strings.Fields(strings.ToLower(t)) {
			h := fnv.New32a()
			h.Write([]byte(strings.Trim(w, ".,;:!?")))
			v[h.Sum32()%64]++
		}
		out[i] = v
	}
	return out, nil
}

func newService(t *testing.T) (*Service, *fakeEmbedder, string) { return newServiceB(t) }

func newServiceB(t testing.TB) (*Service, *fakeEmbedder, string) {
	t.Helper()
	ctx := context.Background()
	ws := t.TempDir()
	st, err := models.Open(ctx, models.Options{Driver: models.DriverSQLite, DSN: filepath.Join(t.TempDir(), "agentry.db")})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	vs, err := vsqlite.New(ctx, st)
	if err != nil {
		t.Fatal(err)
	}
	cfg := config.KnowledgeDefaults()
	cfg.Chunking.Size, cfg.Chunking.Overlap, cfg.Embedding.BatchSize = 200, 20, 3
	cfg.MaxDocumentBytes = 1 << 20
	cfg.Bases = map[string]config.KnowledgeBaseConfig{"kb": {Description: "test", Sources: []string{"docs"}}}
	emb := &fakeEmbedder{}
	return &Service{Config: &cfg, Workspace: ws, Store: st, Vectors: vs, Embedder: emb,
		SSRF: netguard.Policy{Enabled: true}}, emb, ws
}

// ingest runs the workflow's steps in order, as the workflow does.
func ingest(t *testing.T, s *Service, id string) (*workflows.KnowledgePrepareResult, error) {
	t.Helper()
	return ingestB(s, id)
}

func ingestB(s *Service, id string) (*workflows.KnowledgePrepareResult, error) {
	ctx := context.Background()
	prep, err := s.Prepare(ctx, id)
	if err != nil {
		_ = s.Finish(ctx, workflows.KnowledgeFinishInput{Document: id, Error: err.Error()})
		return nil, err
	}
	if prep.Unchanged {
		return prep, s.Finish(ctx, workflows.KnowledgeFinishInput{Document: id, Unchanged: true})
	}
	for b := range prep.Batches() {
		in := workflows.KnowledgeBatchInput{Document: id, Version: prep.Version, Batch: b, BatchSize: prep.BatchSize,
			CallID: workflows.KnowledgeBatchCallID(workflows.KnowledgeIngestWorkflowID(id), prep.Version, b)}
		if _, err := s.EmbedBatch(ctx, in); err != nil {
			return prep, err
		}
	}
	return prep, s.Publish(ctx, workflows.KnowledgeBatchInput{Document: id, Version: prep.Version, BatchSize: prep.BatchSize})
}

func write(t *testing.T, p, text string) { writeB(t, p, text) }

func writeB(t testing.TB, p, text string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
}

func longDoc(fact string) string {
	var b strings.Builder
	for i := range 12 {
		fmt.Fprintf(&b, "Paragraph %d talks about the weather and the sea. It has a second sentence too.\n\n", i)
	}
	b.WriteString(fact + "\n")
	return b.String()
}

func TestIngestSearchReindex(t *testing.T) {
	ctx := context.Background()
	s, emb, ws := newService(t)
	write(t, filepath.Join(ws, "docs", "a.md"), longDoc("The vault code of the lighthouse is 4417."))
	write(t, filepath.Join(ws, "docs", "b.txt"), longDoc("The ferry to Ostrava leaves at seven."))
	write(t, filepath.Join(ws, "docs", "c.html"), "<html><head><script>var x=1</script></head><body><p>The parrot is called <b>Ludmila</b>.</p></body></html>")
	write(t, filepath.Join(ws, "docs", "d.exe"), "MZ\x00\x00binary")
	if _, err := s.Sync(ctx, "kb"); err == nil {
		t.Fatal("Sync without Temporal: want the start error")
	}
	docs, err := s.Store.ListKnowledgeDocuments(ctx, "kb")
	if err != nil || len(docs) != 4 {
		t.Fatalf("documents = %d, %v; want 4", len(docs), err)
	}
	for _, d := range docs {
		_, err := ingest(t, s, d.ID)
		if strings.HasSuffix(d.Source, ".exe") {
			if err == nil || !IsRefusal(err) {
				t.Fatalf("d.exe: err %v, want a refusal", err)
			}
			continue
		}
		if err != nil {
			t.Fatalf("%s: %v", d.Source, err)
		}
	}
	docs, _ = s.Store.ListKnowledgeDocuments(ctx, "kb")
	for _, d := range docs {
		want := models.KnowledgeReady
		if strings.HasSuffix(d.Source, ".exe") {
			want = models.KnowledgeFailed
			if !strings.Contains(d.Error, "unsupported file type") {
				t.Errorf("d.exe error %q", d.Error)
			}
		}
		if d.Status != want {
			t.Errorf("%s: status %s (%s), want %s", d.Source, d.Status, d.Error, want)
		}
	}
	res, err := s.Search(ctx, []string{"kb"}, "what is the vault code of the lighthouse", 3, llm.CallMeta{})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Passages) == 0 || !strings.Contains(res.Passages[0].Text, "4417") || !strings.HasSuffix(res.Passages[0].Source, "a.md") {
		t.Fatalf("top passage = %+v", res.Passages)
	}
	res, err = s.Search(ctx, []string{"kb"}, "parrot name", 3, llm.CallMeta{})
	if err != nil || len(res.Passages) == 0 || !strings.Contains(res.Passages[0].Text, "Ludmila") || strings.Contains(res.Passages[0].Text, "var x") {
		t.Fatalf("html passage = %+v, %v", res, err)
	}

	// Unchanged: nothing embedded again.
	before := emb.texts
	a := DocumentID("kb", filepath.Join(ws, "docs", "a.md"))
	prep, err := ingest(t, s, a)
	if err != nil || !prep.Unchanged || emb.texts != before {
		t.Fatalf("re-ingest unchanged: prep %+v err %v, embedded %d more", prep, err, emb.texts-before)
	}
	// Changed: the old chunks are replaced.
	write(t, filepath.Join(ws, "docs", "a.md"), longDoc("The vault code of the lighthouse is 9902."))
	if _, err := ingest(t, s, a); err != nil {
		t.Fatal(err)
	}
	res, _ = s.Search(ctx, []string{"kb"}, "vault code lighthouse", 10, llm.CallMeta{})
	for _, p := range res.Passages {
		if strings.Contains(p.Text, "4417") {
			t.Fatalf("old chunk still visible after a change: %+v", p)
		}
	}
	if !strings.Contains(res.Passages[0].Text, "9902") {
		t.Fatalf("new chunk not first: %+v", res.Passages)
	}
	for id, n := range emb.calls {
		if id != "" && n != 1 {
			t.Errorf("call id %s embedded %d times", id, n)
		}
	}
	// Bad queries.
	if _, err := s.Search(ctx, []string{"kb"}, "  ", 3, llm.CallMeta{}); !errors.Is(err, ErrInvalid) {
		t.Errorf("empty query: %v", err)
	}
	if _, err := s.Search(ctx, []string{"nope"}, "x", 3, llm.CallMeta{}); !errors.Is(err, ErrBaseNotFound) {
		t.Errorf("unknown base: %v", err)
	}
	res, err = s.Search(ctx, []string{"kb"}, strings.Repeat("lighthouse ", 10000), 3, llm.CallMeta{})
	if err != nil || !res.Truncated {
		t.Errorf("100 KB query: %+v %v", res, err)
	}
}

// TestResumeSkipsStagedBatches: a crash after some batches (their chunks
// staged) resumes without embedding those again.
func TestResumeSkipsStagedBatches(t *testing.T) {
	ctx := context.Background()
	s, emb, ws := newService(t)
	write(t, filepath.Join(ws, "docs", "a.md"), longDoc("fact"))
	id := DocumentID("kb", filepath.Join(ws, "docs", "a.md"))
	_ = s.Store.UpsertKnowledgeDocument(ctx, &models.KnowledgeDocument{ID: id, Base: "kb", Source: filepath.Join(ws, "docs", "a.md"), Root: filepath.Join(ws, "docs"), Status: models.KnowledgeQueued})
	prep, err := s.Prepare(ctx, id)
	if err != nil || prep.Batches() < 2 {
		t.Fatalf("prep %+v %v", prep, err)
	}
	in := workflows.KnowledgeBatchInput{Document: id, Version: prep.Version, Batch: 0, BatchSize: prep.BatchSize, CallID: "c0"}
	if n, err := s.EmbedBatch(ctx, in); err != nil || n != prep.BatchSize {
		t.Fatalf("batch 0: %d %v", n, err)
	}
	// The worker died before recording batch 0: it runs again.
	if n, err := s.EmbedBatch(ctx, in); err != nil || n != 0 {
		t.Fatalf("batch 0 again embedded %d (%v), want 0", n, err)
	}
	if emb.calls["c0"] != 1 {
		t.Fatalf("batch 0 embedded %d times", emb.calls["c0"])
	}
	emb.refuse = true
	in.Batch, in.CallID = 1, "c1"
	if _, err := s.EmbedBatch(ctx, in); !errors.Is(err, costs.ErrBudgetExceeded) {
		t.Fatalf("refused batch: %v", err)
	}
}

func TestBadInputFailsTheDocument(t *testing.T) {
	ctx := context.Background()
	s, _, ws := newService(t)
	outside := t.TempDir()
	write(t, filepath.Join(outside, "secret.md"), "the secret")
	write(t, filepath.Join(ws, "docs", "ok.md"), "fine text")
	if err := os.Symlink(filepath.Join(outside, "secret.md"), filepath.Join(ws, "docs", "link.md")); err != nil {
		t.Fatal(err)
	}
	write(t, filepath.Join(ws, "docs", "bin.txt"), "abc\x00\x01\x02")
	write(t, filepath.Join(ws, "docs", "bad.pdf"), "%PDF-1.4 not really a pdf")
	big, err := os.Create(filepath.Join(ws, "docs", "big.md"))
	if err != nil {
		t.Fatal(err)
	}
	if err := big.Truncate(200 << 20); err != nil { // 200 MB, sparse
		t.Fatal(err)
	}
	big.Close()
	private := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, "internal") }))
	defer private.Close()
	cfg := s.Config.Bases["kb"]
	cfg.Sources = append(cfg.Sources, private.URL+"/page.html", "missing.md")
	s.Config.Bases["kb"] = cfg
	_, _ = s.Sync(ctx, "kb")
	docs, _ := s.Store.ListKnowledgeDocuments(ctx, "kb")
	want := map[string]string{"ok.md": "", "link.md": "leads out of its source folder", "bin.txt": "binary content",
		"bad.pdf": "does not parse", "big.md": "over the limit", "page.html": "SSRF", "missing.md": "source not found"}
	if len(docs) != len(want) {
		t.Fatalf("documents = %d, want %d", len(docs), len(want))
	}
	for _, d := range docs {
		name := filepath.Base(d.Source)
		if d.Status != models.KnowledgeFailed {
			if _, err := ingest(t, s, d.ID); err != nil && !IsRefusal(err) {
				t.Errorf("%s: not a refusal: %v", name, err)
			}
		}
		got, _ := s.Store.GetKnowledgeDocument(ctx, d.ID)
		reason, ok := want[name]
		if !ok {
			t.Errorf("unexpected document %s", d.Source)
			continue
		}
		if reason == "" {
			if got.Status != models.KnowledgeReady {
				t.Errorf("%s: %s %s, want ready", name, got.Status, got.Error)
			}
			continue
		}
		if got.Status != models.KnowledgeFailed || !strings.Contains(got.Error, reason) {
			t.Errorf("%s: %s %q, want failed with %q", name, got.Status, got.Error, reason)
		}
	}
	if _, err := s.AddSource(ctx, "kb", "../outside/x.md"); !errors.Is(err, ErrInvalid) {
		t.Errorf("path escape through the API: %v", err)
	}
	if _, err := s.AddSource(ctx, "kb", "http://10.0.0.1/x"); !errors.Is(err, ErrInvalid) {
		t.Errorf("private URL through the API: %v", err)
	}
}

func TestChunk(t *testing.T) {
	text := strings.Repeat("One sentence here. ", 200)
	chunks := Chunk(text, 300, 50)
	if len(chunks) < 10 {
		t.Fatalf("chunks = %d", len(chunks))
	}
	for i, c := range chunks {
		if len([]rune(c)) > 300 {
			t.Errorf("chunk %d has %d runes", i, len([]rune(c)))
		}
		if i < len(chunks)-1 && !strings.HasSuffix(c, ".") {
			t.Errorf("chunk %d does not end on a sentence: %q", i, c[len(c)-20:])
		}
	}
	if got := Chunk("", 300, 50); len(got) != 0 {
		t.Errorf("empty text: %v", got)
	}
	paras := "First paragraph.\n\n" + strings.Repeat("x", 150) + "\n\nThird paragraph is long enough to spill over the limit."
	if got := Chunk(paras, 200, 0); len(got) != 2 || got[0] != "First paragraph.\n\n"+strings.Repeat("x", 150) {
		t.Errorf("paragraph cut: %q", got)
	}
	if a, b := Chunk(text, 300, 50), Chunk(text, 300, 50); strings.Join(a, "|") != strings.Join(b, "|") {
		t.Error("chunking is not deterministic")
	}
}
