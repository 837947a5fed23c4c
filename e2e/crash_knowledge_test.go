package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/agentryhq/agentry/dev/fakellm"
	"github.com/agentryhq/agentry/dev/gatewaytest"
	"github.com/agentryhq/agentry/internal/knowledge"
	"github.com/agentryhq/agentry/models"
)

// TestKnowledgeIngestionSurvivesSIGKILL (issue 45, Show): the gateway is
// SIGKILLed during the ingestion of 2,000 chunks and restarted; the base
// reaches ready, each chunk is stored once and each embedding batch is in
// the ledger once.
func TestKnowledgeIngestionSurvivesSIGKILL(t *testing.T) {
	crashParallel(t)
	if testing.Short() {
		t.Skip("builds and runs agentryd")
	}
	bin := gatewaytest.Binary(t, "agentryd")
	fake := fakellm.New()
	if err := fake.Start("127.0.0.1:0"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(fake.Close)

	const docs, size, overlap, batch = 100, 400, 40, 8
	ws := t.TempDir()
	dir := filepath.Join(ws, "corpus")
	os.MkdirAll(dir, 0o755)
	wantChunks, wantBatches := 0, 0
	for i := range docs {
		var b strings.Builder
		for p := range 27 {
			fmt.Fprintf(&b, "Document %d, paragraph %d: the beacon %s blinks %d times; its keeper logs the count in book %d before the tide turns.\n\n", i, p, stationName(i*20+p), p+3, i*7+p)
			fmt.Fprintf(&b, "A second line of %d/%d keeps the paragraph near four hundred characters, with words that differ: %s %s.\n\n", i, p, stationName(p), codeword(i+p))
		}
		text := b.String()
		n := len(knowledge.Chunk(text, size, overlap))
		wantChunks += n
		wantBatches += (n + batch - 1) / batch
		os.WriteFile(filepath.Join(dir, fmt.Sprintf("doc-%03d.md", i)), []byte(text), 0o644)
	}
	if wantChunks < 2000 {
		t.Fatalf("corpus has %d chunks, want at least 2000", wantChunks)
	}
	os.WriteFile(filepath.Join(ws, "config.yaml"), []byte(fmt.Sprintf(`
costs: {unknown_pricing: allow}
knowledge:
  embedding: {provider: ollama, model: nomic-embed-text, batch_size: %d}
  chunking: {size: %d, overlap: %d}
  bases:
    corpus: {sources: [corpus]}
`, batch, size, overlap)), 0o644)
	ports := gatewaytest.FreePorts(t, 2)
	const key = "crash-test-key-0123456789"
	env := map[string]string{
		"AGENTRY_WORKSPACE":                       ws,
		"AGENTRY_SERVER_PORT":                     strconv.Itoa(ports[0]),
		"AGENTRY_SERVER_API_KEY":                  key,
		"AGENTRY_TEMPORAL_EMBEDDED_FRONTEND_PORT": strconv.Itoa(ports[1]),
		"AGENTRY_TEMPORAL_EMBEDDED_UI_ENABLED":    "false",
		"AGENTRY_LLM_PROVIDERS_OLLAMA_BASE_URL":   fake.URL(),
	}
	base := fmt.Sprintf("http://127.0.0.1:%d", ports[0])

	first := gatewaytest.StartProcess(t, bin, env)
	gatewaytest.WaitHTTP(t, base+"/health", 90*time.Second, first)
	// Kill once part of the corpus is embedded, mid-ingestion.
	deadline := time.Now().Add(90 * time.Second)
	for fake.CallCount() < wantBatches/4 {
		if time.Now().After(deadline) {
			t.Fatalf("ingestion did not get going (%d embedding calls)\n%s", fake.CallCount(), first.Output)
		}
		time.Sleep(10 * time.Millisecond)
	}
	first.Kill(t)
	killedAt := fake.CallCount()
	t.Logf("killed the gateway after %d of %d embedding batches", killedAt, wantBatches)
	if killedAt >= wantBatches {
		t.Fatalf("the ingestion finished before the kill")
	}

	second := gatewaytest.StartProcess(t, bin, env)
	gatewaytest.WaitHTTP(t, base+"/health", 90*time.Second, second)
	var b gatewaytest.Response
	for deadline := time.Now().Add(3 * time.Minute); ; {
		b = wbCall(t, base, key, "GET", "/api/v1/knowledge/bases/corpus", nil)
		if b.JSON["status"] == "ready" && b.JSON["ready"] == float64(docs) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("base not ready after the restart: %s\n%s", b.Raw, second.Output)
		}
		time.Sleep(200 * time.Millisecond)
	}
	if b.JSON["chunks"] != float64(wantChunks) {
		t.Fatalf("base reports %v chunks, want %d: %s", b.JSON["chunks"], wantChunks, b.Raw)
	}
	second.Stop()

	st, err := models.Open(context.Background(), models.Options{Driver: models.DriverSQLite, DSN: filepath.Join(ws, "data", "agentry.db")})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	var stored, distinct, ledger int64
	st.DB.Raw("SELECT COUNT(*) FROM vector_chunks WHERE base = 'corpus'").Scan(&stored)
	st.DB.Raw("SELECT COUNT(*) FROM (SELECT DISTINCT document, position FROM vector_chunks WHERE base = 'corpus' AND published) x").Scan(&distinct)
	st.DB.Raw("SELECT COUNT(*) FROM cost_ledger WHERE source = 'embedding' AND call_id LIKE 'knowledge-%'").Scan(&ledger)
	t.Logf("after the restart: %d chunks stored (%d distinct), %d embedding batches in the ledger; the fake saw %d embedding calls",
		stored, distinct, ledger, fake.CallCount())
	if stored != int64(wantChunks) || distinct != int64(wantChunks) {
		t.Fatalf("stored %d chunks (%d distinct), want each of %d once", stored, distinct, wantChunks)
	}
	if ledger != int64(wantBatches) {
		t.Fatalf("%d embedding rows in the ledger, want one per batch: %d", ledger, wantBatches)
	}
}
