// Package channeltest holds what the adapters' tests share: an in-memory
// channels.Cursors and a log line collector. Tests only; production code
// never imports it.
package channeltest

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"sync"
)

// Cursors is channels.Cursors in memory (the gateway's is its database).
// The zero value is ready.
type Cursors struct {
	mu sync.Mutex
	m  map[string]string
}

// Cursor implements channels.Cursors.
func (c *Cursors) Cursor(_ context.Context, key string) (string, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.m[key], nil
}

// SetCursor implements channels.Cursors.
func (c *Cursors) SetCursor(_ context.Context, key, value string) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.m == nil {
		c.m = map[string]string{}
	}
	c.m[key] = value
	return nil
}

// CursorKeys implements channels.Cursors (sorted, as the database's).
func (c *Cursors) CursorKeys(_ context.Context, prefix string) ([]string, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []string
	for k := range c.m {
		if strings.HasPrefix(k, prefix) {
			out = append(out, k)
		}
	}
	sort.Strings(out)
	return out, nil
}

// Logs collects log lines (channels.Deps.Logf), to check what was logged
// and what was not (no secrets, no message text).
type Logs struct {
	mu    sync.Mutex
	lines []string
}

// Logf records a line.
func (l *Logs) Logf(format string, args ...any) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.lines = append(l.lines, fmt.Sprintf(format, args...))
}

// Text is every line so far, one per line.
func (l *Logs) Text() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return strings.Join(l.lines, "\n")
}
