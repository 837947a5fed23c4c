package replay_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/agentryhq/agentry/dev/gatewaytest"
	"github.com/agentryhq/agentry/internal/knowledge"
	"github.com/agentryhq/agentry/workflows"
)

// TestRecordKnowledgeIngest records the ingestion of one document in
// three embedding batches (prepare, three batches, publish). It runs only
// with -update (make replay-record).
func TestRecordKnowledgeIngest(t *testing.T) {
	if !*update {
		t.Skip("records only with -update")
	}
	ws := t.TempDir()
	doc := filepath.Join(ws, "handbook", "leave.md")
	os.MkdirAll(filepath.Dir(doc), 0o755)
	if err := os.WriteFile(doc, []byte(strings.Repeat("Employees get 27 days of paid leave a year. ", 40)), 0o644); err != nil {
		t.Fatal(err)
	}
	g := gatewaytest.Start(t, gatewaytest.Options{Workspace: ws, Config: `
knowledge:
  embedding: {provider: ollama, model: nomic-embed-text, batch_size: 2}
  chunking: {size: 400, overlap: 0}
  bases:
    handbook: {sources: [handbook]}
`})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	wid := workflows.KnowledgeIngestWorkflowID(knowledge.DocumentID("handbook", doc))
	var res workflows.KnowledgeIngestResult
	deadline := time.Now().Add(time.Minute)
	for {
		err := g.Temporal.GetWorkflow(ctx, wid, "").Get(ctx, &res)
		if err == nil || time.Now().After(deadline) {
			if err != nil || res.Status != "ready" || res.Chunks < 5 {
				t.Fatalf("ingestion: %+v %v", res, err)
			}
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	record(ctx, t, g.Temporal, wid, "KnowledgeIngest-three-batches.json")
}
