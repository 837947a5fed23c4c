package memory

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/agentryhq/agentry/internal/agent"
	"github.com/agentryhq/agentry/internal/agentdef"
	"github.com/agentryhq/agentry/internal/llm"
	"github.com/agentryhq/agentry/internal/textcut"
)

// Limits of file memory.
const (
	// MaxNoteBytes is the most one note may hold.
	MaxNoteBytes = 256 << 10
	// maxNotes is the most notes a listing shows.
	maxNotes = 200
	// hitChars is the most of one search result shown to the model.
	hitChars = 600
)

var toolSchemas = map[string]llm.Tool{
	agentdef.ToolMemoryWrite: {Name: agentdef.ToolMemoryWrite,
		Description: "Remember a short fact about the user or the work for later conversations. Facts are shown to you at the start of every conversation with this user while they fit.",
		Parameters:  json.RawMessage(`{"type":"object","properties":{"text":{"type":"string","description":"the fact, in one or two sentences"}},"required":["text"]}`)},
	agentdef.ToolMemorySearch: {Name: agentdef.ToolMemorySearch,
		Description: "Search what you remember of this user: facts saved with memory_write and earlier conversations.",
		Parameters:  json.RawMessage(`{"type":"object","properties":{"query":{"type":"string","description":"words to look for"},"limit":{"type":"integer","description":"at most this many results (default 5, at most 20)"}},"required":["query"]}`)},
	agentdef.ToolMemoryReadFile: {Name: agentdef.ToolMemoryReadFile,
		Description: "Read one of your markdown notes about this user (path like notes.md); an empty path lists the notes.",
		Parameters:  json.RawMessage(`{"type":"object","properties":{"path":{"type":"string","description":"relative path of a .md note, or empty to list"}}}`)},
	agentdef.ToolMemoryWriteFile: {Name: agentdef.ToolMemoryWriteFile,
		Description: "Create or replace one of your markdown notes about this user (path like notes.md).",
		Parameters:  json.RawMessage(`{"type":"object","properties":{"path":{"type":"string","description":"relative path ending in .md"},"content":{"type":"string"}},"required":["path","content"]}`)},
}

var _ agent.Memory = (*Service)(nil)

// Tools implements agent.Memory.
func (s *Service) Tools(def *agentdef.Definition) []llm.Tool {
	var out []llm.Tool
	for _, name := range def.Memory.MemoryTools() {
		out = append(out, toolSchemas[name])
	}
	return out
}

// Pinned implements agent.Memory: the hot facts as a block of the system
// prompt.
func (s *Service) Pinned(ctx context.Context, def *agentdef.Definition, sc agent.MemoryScope) (string, error) {
	facts, err := s.Hot(ctx, sc)
	if err != nil || len(facts) == 0 {
		return "", err
	}
	var b strings.Builder
	b.WriteString("## What you remember\nFacts you saved with memory_write in earlier conversations with this user, most recent first:\n")
	for _, f := range facts {
		b.WriteString("- ")
		b.WriteString(strings.ReplaceAll(f.Text, "\n", " "))
		b.WriteByte('\n')
	}
	return strings.TrimRight(b.String(), "\n"), nil
}

// Call implements agent.Memory.
func (s *Service) Call(ctx context.Context, sc agent.MemoryScope, call llm.ToolCall) (agent.ToolResult, error) {
	var args struct {
		Text    string `json:"text"`
		Query   string `json:"query"`
		Limit   int    `json:"limit"`
		Path    string `json:"path"`
		Content string `json:"content"`
	}
	if len(call.Arguments) > 0 {
		if err := json.Unmarshal(call.Arguments, &args); err != nil {
			return toolError("invalid arguments: %v", err), nil
		}
	}
	switch call.Name {
	case agentdef.ToolMemoryWrite:
		e, err := s.Write(ctx, sc, args.Text)
		if res, ok := modelError(err); ok {
			return res, nil
		}
		if err != nil {
			return agent.ToolResult{}, err
		}
		return agent.ToolResult{Content: fmt.Sprintf("remembered (memory %d)", e.ID)}, nil
	case agentdef.ToolMemorySearch:
		hits, err := s.Search(ctx, sc, args.Query, args.Limit)
		if res, ok := modelError(err); ok {
			return res, nil
		}
		if err != nil {
			return agent.ToolResult{}, err
		}
		if len(hits) == 0 {
			return agent.ToolResult{Content: "nothing remembered matches"}, nil
		}
		var b strings.Builder
		for _, h := range hits {
			fmt.Fprintf(&b, "[%s %s] %s\n", h.Kind, h.CreatedAt.Format("2006-01-02"), textcut.Prefix(h.Text, hitChars))
		}
		return agent.ToolResult{Content: strings.TrimRight(b.String(), "\n")}, nil
	case agentdef.ToolMemoryReadFile:
		return s.readNote(sc, args.Path)
	case agentdef.ToolMemoryWriteFile:
		return s.writeNote(sc, args.Path, args.Content)
	}
	return toolError("unknown tool %q", call.Name), nil
}

// modelError is the tool result of an error the model caused.
func modelError(err error) (agent.ToolResult, bool) {
	var long *TooLongError
	if errors.Is(err, ErrEmptyText) || errors.Is(err, ErrEmptyQuery) || errors.As(err, &long) {
		return agent.ToolResult{Content: err.Error(), IsError: true}, true
	}
	return agent.ToolResult{}, false
}

func toolError(format string, args ...any) agent.ToolResult {
	return agent.ToolResult{Content: fmt.Sprintf(format, args...), IsError: true}
}

// NotesDir is the file-memory folder of one scope:
// <file_memory_dir>/<agent>/<digest of subject and user>. The digest keeps
// any subject or user id (slashes, dots) out of the path.
func (s *Service) NotesDir(sc agent.MemoryScope) string {
	h := sha256.Sum256([]byte(sc.Subject + "\x00" + sc.UserID))
	return filepath.Join(s.Dir, sc.AgentID, hex.EncodeToString(h[:12]))
}

func (s *Service) readNote(sc agent.MemoryScope, rel string) (agent.ToolResult, error) {
	dir := s.NotesDir(sc)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return agent.ToolResult{}, fmt.Errorf("file memory: %w", err)
	}
	if strings.TrimSpace(rel) == "" || rel == "." {
		return listNotes(dir)
	}
	path, err := notePath(dir, rel)
	if err != nil {
		return toolError("%v", err), nil
	}
	info, err := os.Lstat(path)
	if errors.Is(err, fs.ErrNotExist) {
		return toolError("no note %s", rel), nil
	}
	if err != nil {
		return agent.ToolResult{}, err
	}
	if !info.Mode().IsRegular() {
		return toolError("%s is not a note", rel), nil
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return agent.ToolResult{}, err
	}
	if len(data) == 0 {
		return agent.ToolResult{Content: "(empty note)"}, nil
	}
	return agent.ToolResult{Content: string(data)}, nil
}

func (s *Service) writeNote(sc agent.MemoryScope, rel, content string) (agent.ToolResult, error) {
	if len(content) > MaxNoteBytes {
		return toolError("a note holds at most %d bytes; this one is %d", MaxNoteBytes, len(content)), nil
	}
	dir := s.NotesDir(sc)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return agent.ToolResult{}, fmt.Errorf("file memory: %w", err)
	}
	path, err := notePath(dir, rel)
	if err != nil {
		return toolError("%v", err), nil
	}
	if info, err := os.Lstat(path); err == nil && !info.Mode().IsRegular() {
		return toolError("%s is not a note", rel), nil
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return agent.ToolResult{}, err
	}
	// Written beside and renamed: a reader never sees half a note, and a
	// symlink placed at the path is replaced, not followed.
	tmp, err := os.CreateTemp(filepath.Dir(path), ".note-*")
	if err != nil {
		return agent.ToolResult{}, err
	}
	_, werr := tmp.WriteString(content)
	cerr := tmp.Close()
	if err := errors.Join(werr, cerr); err != nil {
		os.Remove(tmp.Name())
		return agent.ToolResult{}, err
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		os.Remove(tmp.Name())
		return agent.ToolResult{}, err
	}
	return agent.ToolResult{Content: fmt.Sprintf("wrote %d bytes to %s", len(content), rel)}, nil
}

// notePath confines rel to dir like the file tools (no absolute paths, no
// .. escapes, no symlinks out) and wants a .md note.
func notePath(dir, rel string) (string, error) {
	if !strings.EqualFold(filepath.Ext(rel), ".md") {
		return "", fmt.Errorf("notes are markdown files: %q must end in .md", rel)
	}
	path, err := agent.ConfinedPath(dir, rel)
	if err != nil {
		return "", errors.New(strings.ReplaceAll(err.Error(), "work directory", "notes folder"))
	}
	return path, nil
}

func listNotes(dir string) (agent.ToolResult, error) {
	var notes []string
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.Type().IsRegular() && strings.EqualFold(filepath.Ext(p), ".md") {
			rel, _ := filepath.Rel(dir, p)
			notes = append(notes, filepath.ToSlash(rel))
		}
		return nil
	})
	if err != nil {
		return agent.ToolResult{}, err
	}
	if len(notes) == 0 {
		return agent.ToolResult{Content: "no notes yet"}, nil
	}
	sort.Strings(notes)
	if len(notes) > maxNotes {
		notes = notes[:maxNotes]
	}
	return agent.ToolResult{Content: strings.Join(notes, "\n")}, nil
}
