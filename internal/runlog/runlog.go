// Package runlog keeps the conversation of durable agent runs outside
// Temporal: the activities of a run store every message (system prompt,
// user text, assistant turns with their tool arguments, tool results)
// here, and the workflow passes positions, hashes and short summaries
// only. Small messages live in the application database; large ones in
// content-addressed files under the workspace (<blobs>/<2 hex>/<sha256>),
// referenced from the database row.
package runlog

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"sync"

	"github.com/agentryhq/agentry/internal/llm"
	"github.com/agentryhq/agentry/models"
)

// DefaultInlineBytes is the size up to which a message is kept in the
// database row itself; larger ones go to a blob file.
const DefaultInlineBytes = 16 << 10

// ErrOutOfStep is returned when the stored conversation does not have the
// messages a step expects (a bug, or a run whose rows were deleted).
var ErrOutOfStep = errors.New("the stored conversation of the run is out of step with the workflow")

// Log stores and loads the messages and agent snapshots of durable runs.
type Log struct {
	Store models.RunLogStore
	// BlobDir holds the content-addressed files (workspace/blobs).
	BlobDir string
	// InlineBytes overrides DefaultInlineBytes.
	InlineBytes int

	snapshots sync.Map // sha256 -> []byte (snapshots never change)
}

// Message is one stored message as the wire format keeps it.
type message struct {
	Role       string         `json:"role"`
	Content    string         `json:"content,omitempty"`
	ToolCalls  []llm.ToolCall `json:"tool_calls,omitempty"`
	ToolCallID string         `json:"tool_call_id,omitempty"`
	Name       string         `json:"name,omitempty"`
	// Answer is set on the assistant message an LLM turn stored (PutTurn).
	Answer *answer `json:"answer,omitempty"`
}

// answer is what the log keeps of an LLM turn's response besides its
// message, so that a step run again for the same turn (a worker that died
// after the provider answered, before Temporal recorded the step; a local
// activity whose workflow task was lost) hands the same response back
// instead of paying the provider twice.
type answer struct {
	Usage         llm.Usage `json:"usage"`
	UsageReported bool      `json:"usage_reported,omitempty"`
	RequestID     string    `json:"request_id,omitempty"`
	Model         string    `json:"model,omitempty"`
	FinishReason  string    `json:"finish_reason,omitempty"`
	Attempts      int       `json:"attempts,omitempty"`
}

// Put stores the message at position seq of run key (replacing what a
// failed earlier attempt of the same step may have left there).
func (l *Log) Put(ctx context.Context, key string, seq int, m llm.Message) error {
	return l.PutFrom(ctx, key, seq, m)
}

// PutFrom stores msgs at positions from, from+1, ... of run key in one
// write (replacing what a failed earlier attempt may have left there).
func (l *Log) PutFrom(ctx context.Context, key string, from int, msgs ...llm.Message) error {
	rows, err := l.rows(key, from, msgs)
	if err != nil {
		return err
	}
	return l.Store.PutRunMessages(ctx, rows...)
}

// rows encodes msgs for positions from, from+1, ... of run key.
func (l *Log) rows(key string, from int, msgs []llm.Message) ([]models.RunMessage, error) {
	rows := make([]models.RunMessage, 0, len(msgs)+1) // room for PutTurn's answer
	for i, m := range msgs {
		row, err := l.row(key, from+i, message{Role: m.Role, Content: m.Content, ToolCalls: m.ToolCalls, ToolCallID: m.ToolCallID, Name: m.Name})
		if err != nil {
			return nil, err
		}
		rows = append(rows, row)
	}
	return rows, nil
}

// PutTurn stores the answer of an LLM turn at position from+len(opening)
// of run key, after the opening messages a first turn stores with it, in
// one write; Answered hands the response back to a step run again.
func (l *Log) PutTurn(ctx context.Context, key string, from int, opening []llm.Message, resp *llm.Response) error {
	rows, err := l.rows(key, from, opening)
	if err != nil {
		return err
	}
	row, err := l.row(key, from+len(opening), message{Role: llm.RoleAssistant, Content: resp.Content, ToolCalls: resp.ToolCalls,
		Answer: &answer{Usage: resp.Usage, UsageReported: resp.UsageReported, RequestID: resp.RequestID, Model: resp.Model,
			FinishReason: resp.FinishReason, Attempts: resp.Attempts}})
	if err != nil {
		return err
	}
	return l.Store.PutRunMessages(ctx, append(rows, row)...)
}

// Answered returns the response an LLM turn stored at position seq of run
// key (PutTurn), or false when there is none: the turn has not been
// answered yet, or its answer was stored by a gateway that kept no
// response with it.
func (l *Log) Answered(ctx context.Context, key string, seq int) (*llm.Response, bool, error) {
	row, err := l.Store.RunMessageAt(ctx, key, seq)
	if errors.Is(err, models.ErrNotFound) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, err
	}
	m, err := l.decodeMessage(row)
	if err != nil {
		return nil, false, err
	}
	if m.Role != llm.RoleAssistant || m.Answer == nil {
		return nil, false, nil
	}
	a := m.Answer
	return &llm.Response{Content: m.Content, ToolCalls: m.ToolCalls, Usage: a.Usage, UsageReported: a.UsageReported,
		RequestID: a.RequestID, Model: a.Model, FinishReason: a.FinishReason, Attempts: a.Attempts}, true, nil
}

// row encodes the message at seq (a large body goes to a blob file).
func (l *Log) row(key string, seq int, m message) (models.RunMessage, error) {
	body, err := json.Marshal(m)
	if err != nil {
		return models.RunMessage{}, fmt.Errorf("encode message %d of run %s: %w", seq, key, err)
	}
	row := models.RunMessage{RunKey: key, Seq: seq, Role: m.Role, SizeBytes: int64(len(body))}
	inline := l.InlineBytes
	if inline <= 0 {
		inline = DefaultInlineBytes
	}
	if len(body) <= inline {
		row.Body = string(body)
	} else if row.BlobSHA256, err = l.putBlob(body); err != nil {
		return models.RunMessage{}, err
	}
	return row, nil
}

// Messages returns the first n messages of run key (positions 0..n-1).
func (l *Log) Messages(ctx context.Context, key string, n int) ([]llm.Message, error) {
	rows, err := l.Store.RunMessages(ctx, key, n)
	if err != nil {
		return nil, err
	}
	if len(rows) != n {
		return nil, fmt.Errorf("%w: run %s has %d of the %d messages a turn needs", ErrOutOfStep, key, len(rows), n)
	}
	out := make([]llm.Message, 0, n)
	for i := range rows {
		m, err := l.decode(&rows[i])
		if err != nil {
			return nil, err
		}
		out = append(out, m)
	}
	return out, nil
}

// At returns the message at position seq of run key.
func (l *Log) At(ctx context.Context, key string, seq int) (llm.Message, error) {
	row, err := l.Store.RunMessageAt(ctx, key, seq)
	if errors.Is(err, models.ErrNotFound) {
		return llm.Message{}, fmt.Errorf("%w: run %s has no message %d", ErrOutOfStep, key, seq)
	}
	if err != nil {
		return llm.Message{}, err
	}
	return l.decode(row)
}

// Last returns the newest message of run key: the final reply once the run
// has ended.
func (l *Log) Last(ctx context.Context, key string) (llm.Message, error) {
	row, err := l.Store.LastRunMessage(ctx, key)
	if errors.Is(err, models.ErrNotFound) {
		return llm.Message{}, fmt.Errorf("%w: run %s has no messages", ErrOutOfStep, key)
	}
	if err != nil {
		return llm.Message{}, err
	}
	return l.decode(row)
}

func (l *Log) decode(row *models.RunMessage) (llm.Message, error) {
	m, err := l.decodeMessage(row)
	if err != nil {
		return llm.Message{}, err
	}
	return llm.Message{Role: m.Role, Content: m.Content, ToolCalls: m.ToolCalls, ToolCallID: m.ToolCallID, Name: m.Name}, nil
}

func (l *Log) decodeMessage(row *models.RunMessage) (message, error) {
	body := []byte(row.Body)
	if row.BlobSHA256 != "" {
		var err error
		if body, err = l.blob(row.BlobSHA256); err != nil {
			return message{}, fmt.Errorf("message %d of run %s: %w", row.Seq, row.RunKey, err)
		}
	}
	var m message
	if err := json.Unmarshal(body, &m); err != nil {
		return message{}, fmt.Errorf("decode message %d of run %s: %w", row.Seq, row.RunKey, err)
	}
	return m, nil
}

// PutSnapshot stores v (an agent definition resolved for a run) as JSON
// and returns its content hash, which runs carry instead of the value.
func (l *Log) PutSnapshot(ctx context.Context, v any) (string, error) {
	body, err := json.Marshal(v)
	if err != nil {
		return "", fmt.Errorf("encode run snapshot: %w", err)
	}
	sum := sha256.Sum256(body)
	sha := hex.EncodeToString(sum[:])
	if _, ok := l.snapshots.Load(sha); ok {
		return sha, nil
	}
	if err := l.Store.PutRunSnapshot(ctx, sha, string(body)); err != nil {
		return "", err
	}
	l.snapshots.Store(sha, body)
	return sha, nil
}

// ErrNoSnapshot is the error of a run whose input names no snapshot: it was
// requested by a gateway older than the run log (task-run input version 1)
// and cannot go on after the upgrade; retrying it starts it afresh.
var ErrNoSnapshot = errors.New("this run was started by an older gateway version that kept the conversation in the workflow; it cannot continue after the upgrade: start it again")

// Snapshot loads the snapshot with hash sha into v.
func (l *Log) Snapshot(ctx context.Context, sha string, v any) error {
	if sha == "" {
		return ErrNoSnapshot
	}
	body, ok := l.snapshots.Load(sha)
	if !ok {
		s, err := l.Store.RunSnapshotBody(ctx, sha)
		if err != nil {
			return fmt.Errorf("run snapshot %s: %w", sha, err)
		}
		body = []byte(s)
		l.snapshots.Store(sha, body)
	}
	return json.Unmarshal(body.([]byte), v)
}

// putBlob writes body to its content-addressed file (once: an existing
// file with that name already holds these bytes).
func (l *Log) putBlob(body []byte) (string, error) {
	sum := sha256.Sum256(body)
	sha := hex.EncodeToString(sum[:])
	path := l.blobPath(sha)
	if _, err := os.Stat(path); err == nil {
		return sha, nil
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return "", fmt.Errorf("blob folder: %w", err)
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), ".tmp-"+sha[:8]+"-*")
	if err != nil {
		return "", fmt.Errorf("write blob %s: %w", sha, err)
	}
	_, werr := tmp.Write(body)
	if serr := tmp.Sync(); werr == nil {
		werr = serr
	}
	if cerr := tmp.Close(); werr == nil {
		werr = cerr
	}
	if werr == nil {
		werr = os.Rename(tmp.Name(), path)
	}
	if werr != nil {
		os.Remove(tmp.Name())
		return "", fmt.Errorf("write blob %s: %w", sha, werr)
	}
	return sha, nil
}

func (l *Log) blob(sha string) ([]byte, error) {
	body, err := os.ReadFile(l.blobPath(sha))
	if err != nil {
		return nil, fmt.Errorf("read blob %s: %w", sha, err)
	}
	if sum := sha256.Sum256(body); hex.EncodeToString(sum[:]) != sha {
		return nil, fmt.Errorf("blob %s is damaged (content hash differs)", sha)
	}
	return body, nil
}

func (l *Log) blobPath(sha string) string { return filepath.Join(l.BlobDir, sha[:2], sha) }

// Recorded returns the messages of run key from position 0 up to the first
// missing position: the conversation as far as it was recorded.
func (l *Log) Recorded(ctx context.Context, key string) ([]llm.Message, error) {
	rows, err := l.Store.RunMessages(ctx, key, math.MaxInt32)
	if err != nil {
		return nil, err
	}
	out := make([]llm.Message, 0, len(rows))
	for i := range rows {
		if rows[i].Seq != i {
			break
		}
		m, err := l.decode(&rows[i])
		if err != nil {
			return nil, err
		}
		out = append(out, m)
	}
	return out, nil
}

// CopyPrefix copies the first n messages of run from to run to (a retried
// run goes on from them). The rows are copied as they are: a large message
// keeps pointing at the same content-addressed blob.
func (l *Log) CopyPrefix(ctx context.Context, from, to string, n int) error {
	rows, err := l.Store.RunMessages(ctx, from, n)
	if err != nil {
		return err
	}
	if len(rows) != n {
		return fmt.Errorf("%w: run %s has %d of the %d messages to copy", ErrOutOfStep, from, len(rows), n)
	}
	for i := range rows {
		rows[i].RunKey = to
	}
	return l.Store.PutRunMessages(ctx, rows...)
}

// Delete removes the messages of run key.
func (l *Log) Delete(ctx context.Context, key string) error {
	return l.Store.DeleteRunMessages(ctx, key)
}
