package toolgrant

import "strings"

// KnowledgePrefix starts the grant of one knowledge base: an agent that
// names bases is granted knowledge_search plus knowledge:<base> for each,
// which is how a tool call learns the bases it may search.
const KnowledgePrefix = "knowledge:"

// Knowledge is the grant of a knowledge base.
func Knowledge(base string) string { return KnowledgePrefix + base }

// KnowledgeBases are the bases granted in grants, in order.
func KnowledgeBases(grants []string) []string {
	var out []string
	for _, g := range grants {
		if b, ok := strings.CutPrefix(g, KnowledgePrefix); ok {
			out = append(out, b)
		}
	}
	return out
}
