// Package audit writes the audit log (runtime.audit_log): one JSON object
// per line for every mutating API call and every decision the gateway takes
// about a caller (authentication and permission refusals, cost admission
// refusals). A line says who, what route, which target ids, the outcome and
// the trace id; never a request body, a header or a secret. The file is
// rotated by size: audit.log -> audit.log.1 -> ... -> audit.log.<max_files>.
package audit

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"time"

	"github.com/agentryhq/agentry/internal/config"
	"github.com/agentryhq/agentry/internal/scrub"
)

// Kinds of entries.
const (
	KindAPI      = "api"      // a mutating API call
	KindDecision = "decision" // a refusal decided by policy (auth, permission, cost admission)
)

// Entry is one audit line.
type Entry struct {
	Time time.Time `json:"time"`
	Kind string    `json:"kind"`
	// Who: the authenticated subject and role ("" when unauthenticated).
	Subject string `json:"subject,omitempty"`
	Role    string `json:"role,omitempty"`
	// What: the route template and method, and the ids the route names
	// (task id, agent id, ...).
	Method  string            `json:"method,omitempty"`
	Route   string            `json:"route,omitempty"`
	Targets map[string]string `json:"targets,omitempty"`
	// Outcome is ok, denied, rejected or error; Status the HTTP status;
	// Reason the error code of a refusal.
	Outcome   string `json:"outcome"`
	Status    int    `json:"status,omitempty"`
	Reason    string `json:"reason,omitempty"`
	TraceID   string `json:"trace_id,omitempty"`
	RequestID string `json:"request_id,omitempty"`
	RemoteIP  string `json:"remote_ip,omitempty"`
}

// Defaults of the rotation.
const (
	DefaultMaxSizeMB = 100
	DefaultMaxFiles  = 5
)

// Log is an open audit log. A nil *Log writes nothing, so callers need no
// "enabled" checks. It is safe for concurrent use.
type Log struct {
	path     string
	maxSize  int64
	maxFiles int
	onError  func(error)

	mu   sync.Mutex
	f    *os.File
	size int64
}

// Open opens the audit log runtime.audit_log names, or returns nil when it
// is disabled. Relative files are inside logsDir. onError hears about lines
// that could not be written (they are never retried).
func Open(cfg config.AuditLogConfig, logsDir string, onError func(error)) (*Log, error) {
	if !cfg.Enabled {
		return nil, nil
	}
	path := Path(cfg, logsDir)
	l := &Log{path: path, maxSize: int64(DefaultMaxSizeMB) << 20, maxFiles: DefaultMaxFiles, onError: onError}
	if cfg.MaxSizeMB > 0 {
		l.maxSize = int64(cfg.MaxSizeMB) << 20
	}
	if cfg.MaxFiles > 0 {
		l.maxFiles = cfg.MaxFiles
	}
	if l.onError == nil {
		l.onError = func(error) {}
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o750); err != nil {
		return nil, fmt.Errorf("runtime.audit_log.file: %w", err)
	}
	if err := l.open(); err != nil {
		return nil, fmt.Errorf("runtime.audit_log.file: %w", err)
	}
	return l, nil
}

// Path is the file the configuration names (default logs/audit.log).
func Path(cfg config.AuditLogConfig, logsDir string) string {
	p := cfg.File
	if p == "" {
		p = cfg.Path
	}
	if p == "" {
		p = "audit.log"
	}
	if !filepath.IsAbs(p) {
		p = filepath.Join(logsDir, p)
	}
	return p
}

func (l *Log) open() error {
	f, err := os.OpenFile(l.path, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o600)
	if err != nil {
		return err
	}
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return err
	}
	l.f, l.size = f, st.Size()
	return nil
}

// Write appends one entry (Time defaults to now).
func (l *Log) Write(e Entry) {
	if l == nil {
		return
	}
	if e.Time.IsZero() {
		e.Time = time.Now().UTC()
	}
	line, err := json.Marshal(e.scrubbed())
	if err != nil {
		l.onError(err)
		return
	}
	line = append(line, '\n')
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.f == nil {
		l.onError(errors.New("audit log is closed"))
		return
	}
	if l.size > 0 && l.size+int64(len(line)) > l.maxSize {
		if err := l.rotate(); err != nil {
			l.onError(err)
			if l.f == nil {
				return
			}
		}
	}
	n, err := l.f.Write(line)
	l.size += int64(n)
	if err != nil {
		l.onError(err)
	}
}

// rotate shifts audit.log.N-1 -> .N ... audit.log -> .1 and starts afresh;
// the oldest file beyond max_files is removed.
func (l *Log) rotate() error {
	l.f.Close()
	l.f = nil
	os.Remove(l.path + "." + strconv.Itoa(l.maxFiles))
	for i := l.maxFiles - 1; i >= 1; i-- {
		os.Rename(l.path+"."+strconv.Itoa(i), l.path+"."+strconv.Itoa(i+1))
	}
	if err := os.Rename(l.path, l.path+".1"); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("rotate audit log: %w", err)
	}
	return l.open()
}

// Close closes the file.
func (l *Log) Close() error {
	if l == nil {
		return nil
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.f == nil {
		return nil
	}
	err := l.f.Close()
	l.f = nil
	return err
}

// Tail returns the last n lines, oldest first, reading the rotated file
// too when the current one holds fewer.
func (l *Log) Tail(n int) ([]string, error) {
	if l == nil {
		return []string{}, nil
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []string
	for i := 0; i <= l.maxFiles && len(out) < n; i++ {
		p := l.path
		if i > 0 {
			p += "." + strconv.Itoa(i)
		}
		lines, err := lastLines(p, n-len(out))
		if errors.Is(err, os.ErrNotExist) {
			break
		}
		if err != nil {
			return nil, err
		}
		out = append(lines, out...)
	}
	if out == nil {
		out = []string{}
	}
	return out, nil
}

// lastLines reads the last n lines of the file at p.
func lastLines(p string, n int) ([]string, error) {
	f, err := os.Open(p)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	// Read backwards in blocks until n newlines are seen.
	st, err := f.Stat()
	if err != nil {
		return nil, err
	}
	const block = 64 << 10
	end := st.Size()
	var buf []byte
	for end > 0 && bytes.Count(buf, []byte{'\n'}) <= n {
		start := max(end-block, 0)
		chunk := make([]byte, end-start)
		if _, err := f.ReadAt(chunk, start); err != nil && err != io.EOF {
			return nil, err
		}
		buf = append(chunk, buf...)
		end = start
	}
	var lines []string
	sc := bufio.NewScanner(bytes.NewReader(buf))
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	for sc.Scan() {
		if len(sc.Bytes()) > 0 {
			lines = append(lines, sc.Text())
		}
	}
	if end > 0 && len(lines) > 0 {
		lines = lines[1:] // the first line may be cut
	}
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return lines, nil
}

// scrubbed is the entry with secrets removed from every text a caller can
// put in it (internal/scrub): path parameters, the subject, the request id
// header, the reason. An audit file must never hold a key someone put in a
// path. Method, route template, role and outcome are the gateway's own
// vocabulary and are written as they are (scrubbing is not free: a busy
// gateway writes many lines).
func (e Entry) scrubbed() Entry {
	for _, f := range []*string{&e.Subject, &e.Reason, &e.RequestID, &e.RemoteIP} {
		*f = scrub.String(*f)
	}
	if len(e.Targets) > 0 {
		t := make(map[string]string, len(e.Targets))
		for k, v := range e.Targets {
			t[k] = scrub.String(v)
		}
		e.Targets = t
	}
	return e
}
