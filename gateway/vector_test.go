package gateway

import (
	"context"
	"testing"

	"github.com/agentryhq/agentry/internal/vector"
	vectorsqlite "github.com/agentryhq/agentry/internal/vector/sqlite"
)

// The default configuration opens the embedded vector store on the
// gateway's database, ready to stage and search.
func TestServicesOpenTheEmbeddedVectorStore(t *testing.T) {
	s := testServices(t)
	if _, ok := s.Vectors.(*vectorsqlite.Store); !ok {
		t.Fatalf("Services.Vectors = %T, want the embedded store", s.Vectors)
	}
	ctx := context.Background()
	if err := s.Vectors.Stage(ctx, "kb", "doc", "v1", []vector.Chunk{{Position: 0, Text: "wired through the gateway", Vector: []float32{1, 0}}}); err != nil {
		t.Fatal(err)
	}
	if err := s.Vectors.Publish(ctx, "kb", "doc", "v1"); err != nil {
		t.Fatal(err)
	}
	hits, err := s.Vectors.Search(ctx, vector.Query{Bases: []string{"kb"}, Text: "gateway", Vector: []float32{1, 0}, K: 3})
	if err != nil || len(hits) != 1 || hits[0].TextScore <= 0 || hits[0].VectorScore <= 0 {
		t.Fatalf("search: %+v %v", hits, err)
	}
}
