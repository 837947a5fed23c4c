package config

import (
	"strings"
	"testing"
)

func TestKnowledgeValidation(t *testing.T) {
	ok := Defaults()
	ok.Knowledge.Bases = map[string]KnowledgeBaseConfig{"handbook": {Sources: []string{"docs/", "https://example.com/a.html"}}}
	if err := Validate(&ok); err != nil {
		t.Fatalf("valid knowledge section refused: %v", err)
	}
	for key, set := range map[string]func(c *Config){
		"knowledge.chunking.size":        func(c *Config) { c.Knowledge.Chunking.Size = 10 },
		"knowledge.chunking.overlap":     func(c *Config) { c.Knowledge.Chunking.Overlap = 900 },
		"knowledge.embedding.batch_size": func(c *Config) { c.Knowledge.Embedding.BatchSize = 0 },
		"knowledge.top_k":                func(c *Config) { c.Knowledge.TopK = -1 },
		"knowledge.bases.Bad Id":         func(c *Config) { c.Knowledge.Bases = map[string]KnowledgeBaseConfig{"Bad Id": {}} },
		"knowledge.bases.kb.sources[0]": func(c *Config) {
			c.Knowledge.Bases = map[string]KnowledgeBaseConfig{"kb": {Sources: []string{"ftp://x/y"}}}
		},
		"knowledge.max_document_bytes": func(c *Config) { c.Knowledge.MaxDocumentBytes = 0 },
	} {
		c := Defaults()
		set(&c)
		err := Validate(&c)
		if err == nil || !strings.Contains(err.Error(), key) {
			t.Errorf("%s: error %v, want one naming the key", key, err)
		}
	}
}
