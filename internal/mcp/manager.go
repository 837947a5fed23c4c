package mcp

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/agentryhq/agentry/internal/scrub"
	"log/slog"
	"net/url"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/agentryhq/agentry/internal/llm"
	"github.com/agentryhq/agentry/internal/telemetry"
	"github.com/agentryhq/agentry/internal/toolgrant"
)

// ToolPrefix starts every MCP tool name offered to a model:
// mcp__<server>__<tool>.
const ToolPrefix = toolgrant.MCPPrefix

// ToolName is the name the model sees for a server's tool.
func ToolName(server, tool string) string { return ToolPrefix + server + "__" + tool }

// SplitToolName parses mcp__<server>__<tool>.
func SplitToolName(name string) (server, tool string, ok bool) {
	rest, found := strings.CutPrefix(name, ToolPrefix)
	if !found {
		return "", "", false
	}
	server, tool, ok = strings.Cut(rest, "__")
	return server, tool, ok && server != "" && tool != ""
}

// Grant is the tool-allowlist entry that lets an agent use every tool of a
// server ("*" for every server): mcp__<server>__*.
func Grant(server string) string { return toolgrant.MCP(server) }

// Granted reports whether a tool name is allowed by grants (exact names or
// the patterns Grant makes).
func Granted(grants []string, name string) bool {
	for _, g := range grants {
		if g == name {
			return true
		}
		if prefix, ok := strings.CutSuffix(g, "*"); ok && strings.HasPrefix(name, ToolPrefix) && strings.HasPrefix(name, prefix) {
			return true
		}
	}
	return false
}

// Manager holds the connections to every configured server.
type Manager struct {
	policy  Policy
	log     *slog.Logger
	timeout time.Duration
	bg      context.Context
	stop    context.CancelFunc

	mu      sync.RWMutex
	servers map[string]*entry
	// secrets holds every server's header and env values in the one
	// scrubber, so no error text, log line or API answer carries them.
	secrets *scrub.Source
}

// entry is one server: its spec, its live connection (nil while
// disconnected) and the last connection error.
type entry struct {
	spec      Spec
	conn      *conn
	lastErr   string
	redialing bool
	removed   bool
}

// ConnectTimeout bounds connect + initialize + list tools.
var ConnectTimeout = 10 * time.Second

// RedialBackoff is the first and the longest wait between reconnect tries.
var RedialBackoff = [2]time.Duration{500 * time.Millisecond, 30 * time.Second}

// NewManager builds a manager; Close stops it.
func NewManager(policy Policy, log *slog.Logger) *Manager {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	bg, stop := context.WithCancel(context.Background())
	return &Manager{policy: policy, log: log, timeout: ConnectTimeout, bg: bg, stop: stop, servers: map[string]*entry{}, secrets: scrub.Register("mcp")}
}

// RegisterSecrets adds a server's header and env values to the scrubber
// before anything is dialled (Dial's own errors are scrubbed already).
func (m *Manager) RegisterSecrets(spec Spec) { m.secrets.Add(spec.secretValues()...) }

// refreshSecrets sets the scrubber's values to those of the servers in
// use (called after every change of the set); m.mu must not be held.
func (m *Manager) refreshSecrets() {
	m.mu.RLock()
	var vals []string
	for _, e := range m.servers {
		vals = append(vals, e.spec.secretValues()...)
	}
	m.mu.RUnlock()
	m.secrets.Set(vals...)
}

// Policy is the manager's policy.
func (m *Manager) Policy() Policy { return m.policy }

func (m *Manager) dialOpts() dialOptions {
	return dialOptions{timeout: m.timeout, httpClient: m.policy.SSRF.Client(0), onToolsChanged: m.toolsChanged}
}

// Dial connects to spec and lists its tools without installing it: the
// caller stores the definition and then calls Install, or Discard.
func (m *Manager) Dial(ctx context.Context, spec Spec) (*Pending, error) {
	c, err := dial(ctx, spec, m.dialOpts())
	if err != nil {
		return nil, err
	}
	return &Pending{c: c}, nil
}

// Pending is a dialled server not yet in use.
type Pending struct{ c *conn }

// Tools are the names of the server's tools.
func (p *Pending) Tools() []string { return toolNames(p.c.toolList()) }

// Discard closes the connection.
func (p *Pending) Discard() { p.c.close() }

// Install puts a dialled server in use, replacing (and closing) an earlier
// connection of the same id.
func (m *Manager) Install(p *Pending) {
	m.mu.Lock()
	old := m.servers[p.c.spec.ID]
	e := &entry{spec: p.c.spec, conn: p.c}
	m.servers[p.c.spec.ID] = e
	var oldConn *conn
	if old != nil {
		old.removed, oldConn = true, old.conn
	}
	m.mu.Unlock()
	if oldConn != nil {
		oldConn.close()
	}
	m.refreshSecrets()
	m.watch(e, p.c)
}

// Add registers a server and connects in the background (startup: an
// unreachable server must not stop the gateway; it is retried).
func (m *Manager) Add(spec Spec) {
	e := &entry{spec: spec, redialing: true}
	m.mu.Lock()
	var oldConn *conn
	if old := m.servers[spec.ID]; old != nil {
		old.removed, oldConn = true, old.conn
	}
	m.servers[spec.ID] = e
	m.mu.Unlock()
	if oldConn != nil {
		oldConn.close()
	}
	m.refreshSecrets()
	go m.redial(e)
}

// Remove stops using a server.
func (m *Manager) Remove(id string) {
	m.mu.Lock()
	e := m.servers[id]
	delete(m.servers, id)
	var c *conn
	if e != nil {
		e.removed, c = true, e.conn
	}
	m.mu.Unlock()
	if c != nil {
		c.close()
	}
	m.refreshSecrets()
}

// Close disconnects every server.
func (m *Manager) Close() {
	m.stop()
	m.mu.Lock()
	var conns []*conn
	for _, e := range m.servers {
		e.removed = true
		if e.conn != nil {
			conns = append(conns, e.conn)
		}
	}
	m.servers = map[string]*entry{}
	m.mu.Unlock()
	for _, c := range conns {
		c.close()
	}
	m.secrets.Close()
}

// watch marks the entry disconnected when the session ends (the child
// exited, the HTTP session was lost) and starts reconnecting.
func (m *Manager) watch(e *entry, c *conn) {
	go func() {
		err := c.session.Wait()
		msg := "session ended"
		if err != nil && !errors.Is(err, sdk.ErrConnectionClosed) {
			msg = "session ended: " + scrub.String(err.Error())
		}
		m.lost(e, c, msg)
	}()
}

// lost retires c, if it is still e's connection, and starts reconnecting
// in the background (the tool list offered to models needs a session).
func (m *Manager) lost(e *entry, c *conn, msg string) {
	m.mu.Lock()
	if e.removed || e.conn != c {
		m.mu.Unlock()
		return
	}
	e.conn, e.lastErr = nil, msg
	start := !e.redialing
	e.redialing = true
	m.mu.Unlock()
	m.log.Warn("mcp server disconnected; reconnecting", "server", e.spec.ID, "err", msg)
	if start {
		go m.redial(e)
	}
}

// redial reconnects with backoff until it succeeds, the server is removed
// or the manager closes. The tool list is read anew on every reconnect.
func (m *Manager) redial(e *entry) {
	wait := RedialBackoff[0]
	for {
		m.mu.Lock()
		if e.conn != nil { // a call reconnected (reconnect)
			e.redialing = false
			m.mu.Unlock()
			return
		}
		m.mu.Unlock()
		c, err := dial(m.bg, e.spec, m.dialOpts())
		m.mu.Lock()
		if e.removed || m.bg.Err() != nil || (err == nil && e.conn != nil) {
			if e.conn != nil {
				e.redialing = false
			}
			m.mu.Unlock()
			if c != nil {
				c.close()
			}
			return
		}
		if err == nil {
			e.conn, e.lastErr, e.redialing = c, "", false
			m.mu.Unlock()
			m.log.Info("mcp server connected", "server", e.spec.ID, "tools", len(c.toolList()))
			m.watch(e, c)
			return
		}
		msg := scrub.String(err.Error())
		e.lastErr = msg
		m.mu.Unlock()
		m.log.Warn("mcp server unreachable", "server", e.spec.ID, "err", msg, "retry_in", wait.String())
		select {
		case <-time.After(wait):
		case <-m.bg.Done():
			return
		}
		wait = min(wait*2, RedialBackoff[1])
	}
}

// reconnect dials a disconnected server for a call, rather than failing it
// while the background redial waits out its backoff (up to 30 s): a durable
// run's retried tool step really tries the server again. A failed dial is a
// *TransportError (retried like any lost server); a connection the redial
// loop made meanwhile wins, and the loop stops once it sees one.
func (m *Manager) reconnect(ctx context.Context, e *entry) (*conn, error) {
	c, err := dial(ctx, e.spec, m.dialOpts())
	m.mu.Lock()
	defer m.mu.Unlock()
	if err != nil {
		msg := err.Error()
		var ue *UnreachableError
		if errors.As(err, &ue) {
			msg = ue.Msg
		}
		if e.conn == nil && !e.removed {
			e.lastErr = msg
		}
		return nil, &TransportError{ServerID: e.spec.ID, Msg: "not connected: " + msg}
	}
	if e.removed || m.bg.Err() != nil {
		c.close()
		return nil, &TransportError{ServerID: e.spec.ID, Msg: "not connected: server removed"}
	}
	if e.conn != nil {
		c.close()
		return e.conn, nil
	}
	e.conn, e.lastErr = c, ""
	m.log.Info("mcp server connected", "server", e.spec.ID, "tools", len(c.toolList()))
	m.watch(e, c)
	return c, nil
}

// toolsChanged re-reads a session's tool list on
// notifications/tools/list_changed.
func (m *Manager) toolsChanged(s *sdk.ClientSession) {
	m.mu.RLock()
	var target *entry
	var c *conn
	for _, e := range m.servers {
		if e.conn != nil && e.conn.session == s {
			target, c = e, e.conn
		}
	}
	m.mu.RUnlock()
	if target == nil {
		return
	}
	ctx, cancel := context.WithTimeout(m.bg, m.timeout)
	defer cancel()
	if err := c.refresh(ctx); err != nil {
		m.log.Warn("mcp tool list refresh failed; keeping the old list", "server", target.spec.ID, "err", scrub.String(err.Error()))
		return
	}
	m.log.Info("mcp tool list changed", "server", target.spec.ID, "tools", len(c.toolList()))
}

// ServerStatus is what GET /mcp/own lists about a server.
type ServerStatus struct {
	Redacted
	Status string   `json:"status"`
	Tools  []string `json:"tools"`
	Error  string   `json:"error,omitempty"`
}

// Status lists every server, by id.
func (m *Manager) Status() []ServerStatus {
	m.mu.RLock()
	defer m.mu.RUnlock()
	out := make([]ServerStatus, 0, len(m.servers))
	for _, e := range m.servers {
		out = append(out, e.status())
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out
}

// Get is one server's status.
func (m *Manager) Get(id string) (ServerStatus, bool) {
	m.mu.RLock()
	defer m.mu.RUnlock()
	e, ok := m.servers[id]
	if !ok {
		return ServerStatus{}, false
	}
	return e.status(), true
}

// Spec is a server's definition (with secrets: gateway-internal use only).
func (m *Manager) Spec(id string) (Spec, bool) {
	m.mu.RLock()
	defer m.mu.RUnlock()
	e, ok := m.servers[id]
	if !ok {
		return Spec{}, false
	}
	return e.spec, true
}

func (e *entry) status() ServerStatus {
	st := ServerStatus{Redacted: e.spec.Redact(), Status: StatusDisconnected, Tools: []string{}, Error: e.lastErr}
	if e.conn != nil {
		st.Status = StatusConnected
		st.Tools = toolNames(e.conn.toolList())
	}
	return st
}

func toolNames(ts []tool) []string {
	out := make([]string, 0, len(ts))
	for _, t := range ts {
		out = append(out, t.Name)
	}
	return out
}

// Tools are the tool schemas of the servers an agent opted into (server
// ids, "*" for all), as mcp__<server>__<tool>, ordered by server then tool.
// A disconnected server offers the tools it listed last... none, when it
// never connected.
func (m *Manager) Tools(servers []string) []llm.Tool {
	if len(servers) == 0 {
		return nil
	}
	m.mu.RLock()
	ids := make([]string, 0, len(m.servers))
	for id := range m.servers {
		if slices.Contains(servers, "*") || slices.Contains(servers, id) {
			ids = append(ids, id)
		}
	}
	conns := map[string]*conn{}
	for _, id := range ids {
		conns[id] = m.servers[id].conn
	}
	m.mu.RUnlock()
	sort.Strings(ids)
	var out []llm.Tool
	for _, id := range ids {
		c := conns[id]
		if c == nil {
			continue
		}
		for _, t := range c.toolList() {
			name := ToolName(id, t.Name)
			if !toolNameRe.MatchString(name) {
				continue
			}
			desc := t.Description
			if desc == "" {
				desc = fmt.Sprintf("Tool %s of MCP server %s.", t.Name, id)
			}
			out = append(out, llm.Tool{Name: name, Description: desc, Parameters: t.Schema})
		}
	}
	return out
}

// Call runs mcp__<server>__<tool> with JSON arguments. Problems the model
// can act on are results; a server that cannot be reached is a
// *TransportError (chat shows it to the model, task runs retry it).
func (m *Manager) Call(ctx context.Context, name string, args json.RawMessage) (res Result, err error) {
	server, toolName, ok := SplitToolName(name)
	if !ok {
		return Result{Content: fmt.Sprintf("%q is not an MCP tool name (mcp__<server>__<tool>)", name), IsError: true}, nil
	}
	ctx, span := telemetry.Tracer().Start(ctx, "tools/call "+toolName, trace.WithSpanKind(trace.SpanKindClient))
	defer func() { m.endCallSpan(span, server, toolName, args, res, err) }()
	m.mu.RLock()
	e, known := m.servers[server]
	var c *conn
	if known {
		c = e.conn
	}
	m.mu.RUnlock()
	if !known {
		return Result{Content: fmt.Sprintf("no MCP server %q is registered", server), IsError: true}, nil
	}
	if c == nil {
		if c, err = m.reconnect(ctx, e); err != nil {
			return Result{}, err
		}
	}
	res, err = c.call(ctx, toolName, args)
	var te *TransportError
	if errors.As(err, &te) {
		// The session is no good: retire it now, so the next call (a
		// durable run's retry) dials afresh (new session id, fresh tool
		// list) instead of finding this one.
		m.lost(e, c, te.Msg)
		c.close()
	}
	return res, err
}

// endCallSpan records an MCP tool call on its client span (a child of the
// agent's execute_tool span, which carries the model's tool call id): the
// MCP method, the server and its transport, the tool and the outcome (ok,
// tool_error for the tool's own isError or a refused call,
// transport_error for a lost server, error otherwise). Arguments and
// results only with telemetry.capture_content; the status never carries
// the error's text (a server's message may quote the arguments), and every
// string is scrubbed again on export.
func (m *Manager) endCallSpan(span trace.Span, server, tool string, args json.RawMessage, res Result, err error) {
	defer span.End()
	if !span.IsRecording() {
		return
	}
	var te *TransportError
	outcome := "ok"
	switch {
	case errors.As(err, &te):
		outcome = "transport_error"
	case err != nil:
		outcome = "error"
	case res.IsError:
		outcome = "tool_error"
	}
	span.SetAttributes(attribute.String("mcp.method.name", "tools/call"), attribute.String("gen_ai.operation.name", "execute_tool"),
		attribute.String("gen_ai.tool.name", tool), attribute.String("agentry.mcp.server", server),
		attribute.String("agentry.mcp.outcome", outcome))
	if spec, ok := m.Spec(server); ok {
		span.SetAttributes(attribute.String("agentry.mcp.transport", spec.Transport))
		if u, perr := url.Parse(spec.URL); spec.URL != "" && perr == nil {
			span.SetAttributes(attribute.String("server.address", u.Hostname()))
		}
	}
	if telemetry.CaptureContent() {
		span.SetAttributes(attribute.String("gen_ai.tool.call.arguments", string(args)), attribute.String("gen_ai.tool.call.result", res.Content))
	}
	if outcome != "ok" {
		span.SetAttributes(attribute.String("error.type", outcome))
		span.SetStatus(codes.Error, outcome)
	}
}
