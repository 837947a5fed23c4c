package agentdef

import (
	"fmt"
	"slices"
	"strings"
)

// Refs are the names a definition may refer to that live outside agent
// files. A nil list is not checked (a definition read without the
// gateway's configuration, such as a package's).
type Refs struct {
	// KnowledgeBases are the ids of knowledge.bases.
	KnowledgeBases []string
}

func (d *Definition) checkRefs(refs Refs) []FieldError {
	var p []FieldError
	for _, id := range d.Knowledge {
		switch {
		case strings.TrimSpace(id) == "":
			p = append(p, FieldError{Key: "knowledge", Msg: "empty knowledge base id"})
		case refs.KnowledgeBases != nil && !slices.Contains(refs.KnowledgeBases, id):
			known := "none is configured"
			if len(refs.KnowledgeBases) > 0 {
				known = "known: " + strings.Join(refs.KnowledgeBases, ", ")
			}
			p = append(p, FieldError{Key: "knowledge", Msg: fmt.Sprintf("unknown knowledge base %q (knowledge.bases in config.yaml; %s)", id, known)})
		}
	}
	return p
}

// Refs are the references the registry checks definitions against.
func (r *Registry) Refs() Refs {
	if r == nil {
		return Refs{}
	}
	r.mu.RLock()
	defer r.mu.RUnlock()
	return r.refs
}

// SetRefs sets the references definitions are checked against and loads
// every definition again.
func (r *Registry) SetRefs(refs Refs) {
	r.mu.Lock()
	r.refs = refs
	r.mu.Unlock()
	r.Reload()
}
