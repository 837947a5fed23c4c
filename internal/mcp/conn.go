package mcp

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"regexp"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/agentryhq/agentry/drivers"
	"github.com/agentryhq/agentry/internal/fault"
	"github.com/agentryhq/agentry/internal/scrub"

	"github.com/google/jsonschema-go/jsonschema"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// MetaIdempotencyKey is the key of a tools/call request's _meta that
// carries the call's idempotency key (docs/tools.md, "Idempotency keys").
// MCP's key rules: a prefix of dot-separated labels and a slash, in
// reverse DNS notation under a name the project controls (its GitHub
// organisation; a second label of "modelcontextprotocol" or "mcp" would be
// reserved for MCP), then a name of alphanumerics and hyphens.
const MetaIdempotencyKey = "io.github.agentryhq/idempotency-key"

// Statuses of a server connection.
const (
	StatusConnected    = "connected"
	StatusDisconnected = "disconnected"
)

// UnreachableError: the server could not be contacted, did not speak MCP,
// hung on initialize or returned a tool list we cannot use.
type UnreachableError struct {
	ServerID string
	Msg      string
}

func (e *UnreachableError) Error() string { return fmt.Sprintf("mcp server %s: %s", e.ServerID, e.Msg) }

// Fault implements fault.Fault: 502 mcp_unreachable, naming the server.
func (e *UnreachableError) Fault() fault.Detail {
	return fault.Detail{Kind: fault.KindUpstream, Code: "mcp_unreachable", Message: e.Error(), Fields: map[string]any{"server": e.ServerID}}
}

// TransportError: a tool call did not reach the server or its answer got
// lost. Unlike a tool's own isError result it may be retried (task runs
// do, through Temporal's retry policy).
type TransportError struct {
	ServerID string
	Msg      string
}

func (e *TransportError) Error() string { return fmt.Sprintf("mcp server %s: %s", e.ServerID, e.Msg) }

// toolNameRe is what LLM providers accept as a function name; tools whose
// full name mcp__<server>__<tool> does not fit are not offered.
var toolNameRe = regexp.MustCompile(`^[A-Za-z0-9_-]{1,64}$`)

// tool is one tool of a server, with its compiled input schema.
type tool struct {
	Name        string
	Description string
	Schema      json.RawMessage
	resolved    *jsonschema.Resolved
}

// conn is one live session with a server and the tool list it reported.
type conn struct {
	spec    Spec
	session *sdk.ClientSession
	stderr  *tailBuffer

	mu    sync.Mutex
	tools []tool // sorted by name
}

// dialOptions are what a dial needs besides the spec.
type dialOptions struct {
	timeout    time.Duration
	httpClient *http.Client
	// onToolsChanged runs (in its own goroutine) on notifications/tools/list_changed.
	onToolsChanged func(*sdk.ClientSession)
}

// dial connects, initializes and lists the tools; any failure closes what
// was opened and is an *UnreachableError naming the server.
func dial(ctx context.Context, spec Spec, o dialOptions) (*conn, error) {
	c := &conn{spec: spec}
	var transport sdk.Transport
	switch spec.Transport {
	case TransportHTTP:
		hc := *o.httpClient
		hc.Transport = &headerTransport{base: o.httpClient.Transport, headers: spec.Headers}
		transport = &sdk.StreamableClientTransport{Endpoint: spec.URL, HTTPClient: &hc}
	case TransportStdio:
		cmd := exec.Command(spec.Command, spec.Args...)
		cmd.Env = childEnv(spec.Env)
		c.stderr = &tailBuffer{max: 2048}
		cmd.Stderr = c.stderr
		transport = &sdk.CommandTransport{Command: cmd, TerminateDuration: time.Second}
	default:
		return nil, &UnreachableError{ServerID: spec.ID, Msg: fmt.Sprintf("unknown transport %q", spec.Transport)}
	}
	client := sdk.NewClient(&sdk.Implementation{Name: "agentry", Version: "1"}, &sdk.ClientOptions{
		Capabilities: &sdk.ClientCapabilities{},
		ToolListChangedHandler: func(_ context.Context, req *sdk.ToolListChangedRequest) {
			if o.onToolsChanged != nil {
				go o.onToolsChanged(req.Session)
			}
		},
	})
	dctx, cancel := context.WithTimeout(ctx, o.timeout)
	defer cancel()
	session, err := client.Connect(dctx, transport, nil)
	if err != nil {
		return nil, c.unreachable("connect and initialize", err, dctx)
	}
	c.session = session
	tools, err := listTools(dctx, session)
	if err != nil {
		_ = session.Close()
		var bad *malformedError
		if errors.As(err, &bad) {
			return nil, &UnreachableError{ServerID: spec.ID, Msg: "returned a malformed tool list: " + c.scrub(bad.msg)}
		}
		return nil, c.unreachable("list tools", err, dctx)
	}
	c.tools = tools
	return c, nil
}

func (c *conn) unreachable(step string, err error, ctx context.Context) error {
	msg := err.Error()
	if ctx.Err() == context.DeadlineExceeded {
		msg = "no answer in time (does it speak MCP?)"
	}
	if c.stderr != nil {
		if tail := strings.TrimSpace(c.stderr.String()); tail != "" {
			msg += "; stderr: " + tail
		}
	}
	return &UnreachableError{ServerID: c.spec.ID, Msg: step + ": " + c.scrub(msg)}
}

// malformedError is a tool list we refuse to offer.
type malformedError struct{ msg string }

func (e *malformedError) Error() string { return e.msg }

// listTools reads every page of the tool list and compiles each schema.
func listTools(ctx context.Context, s *sdk.ClientSession) ([]tool, error) {
	var out []tool
	seen := map[string]bool{}
	for t, err := range s.Tools(ctx, nil) {
		if err != nil {
			return nil, err
		}
		if t.Name == "" || seen[t.Name] {
			return nil, &malformedError{msg: fmt.Sprintf("tool name %q is empty or listed twice", t.Name)}
		}
		seen[t.Name] = true
		raw, err := json.Marshal(t.InputSchema)
		if err != nil || t.InputSchema == nil {
			return nil, &malformedError{msg: fmt.Sprintf("tool %s has no usable input schema", t.Name)}
		}
		var sch jsonschema.Schema
		if err := json.Unmarshal(raw, &sch); err != nil {
			return nil, &malformedError{msg: fmt.Sprintf("tool %s: input schema: %v", t.Name, err)}
		}
		if sch.Type != "object" {
			return nil, &malformedError{msg: fmt.Sprintf("tool %s: input schema type is %q, want object", t.Name, sch.Type)}
		}
		resolved, err := sch.Resolve(nil)
		if err != nil {
			return nil, &malformedError{msg: fmt.Sprintf("tool %s: input schema: %v", t.Name, err)}
		}
		out = append(out, tool{Name: t.Name, Description: t.Description, Schema: raw, resolved: resolved})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

// refresh re-reads the tool list (after list_changed); a malformed new
// list keeps the old one.
func (c *conn) refresh(ctx context.Context) error {
	tools, err := listTools(ctx, c.session)
	if err != nil {
		return err
	}
	c.mu.Lock()
	c.tools = tools
	c.mu.Unlock()
	return nil
}

func (c *conn) toolList() []tool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.tools
}

func (c *conn) lookup(name string) (tool, bool) {
	for _, t := range c.toolList() {
		if t.Name == name {
			return t, true
		}
	}
	return tool{}, false
}

// Result is a tool's answer as the model sees it.
type Result struct {
	Content string
	IsError bool
}

// call validates the arguments against the tool's schema and calls it. A
// failing validation, an unknown tool and the tool's own isError are
// results (the model reads them); a lost connection is a *TransportError.
func (c *conn) call(ctx context.Context, name string, args json.RawMessage) (Result, error) {
	t, ok := c.lookup(name)
	if !ok {
		return Result{Content: fmt.Sprintf("mcp server %s has no tool %q", c.spec.ID, name), IsError: true}, nil
	}
	if len(args) == 0 {
		args = json.RawMessage("{}")
	}
	var instance any
	if err := json.Unmarshal(args, &instance); err != nil {
		return Result{Content: fmt.Sprintf("arguments are not valid JSON: %v", err), IsError: true}, nil
	}
	if _, isObject := instance.(map[string]any); !isObject {
		return Result{Content: "arguments must be a JSON object", IsError: true}, nil
	}
	if err := t.resolved.Validate(instance); err != nil {
		return Result{Content: fmt.Sprintf("arguments do not match the input schema of %s: %v", name, err), IsError: true}, nil
	}
	params := &sdk.CallToolParams{Name: name, Arguments: args}
	if key := drivers.IdempotencyKey(ctx); key != "" {
		params.Meta = sdk.Meta{MetaIdempotencyKey: key}
	}
	res, err := c.session.CallTool(ctx, params)
	if err != nil {
		if ctx.Err() != nil {
			return Result{}, ctx.Err()
		}
		if wire := serverAnswer(err); wire != nil {
			// The server answered with a protocol error (unknown tool,
			// invalid params): a result, not worth retrying.
			return Result{Content: c.scrub(wire.Message), IsError: true}, nil
		}
		return Result{}, &TransportError{ServerID: c.spec.ID, Msg: c.scrub(err.Error())}
	}
	return Result{Content: c.scrub(render(res)), IsError: res.IsError}, nil
}

// sdkLocalCodes are the codes of the go-sdk's own jsonrpc2 sentinels
// (internal/jsonrpc2, not importable): ErrRejected -32005 "rejected by
// transport", ErrServerClosing -32004 and ErrClientClosing -32003. The SDK
// makes them on our side for a request that got no answer: the streamable
// HTTP client wraps every failed POST in ErrRejected (connection refused or
// reset, 502/503/504/429) so the session survives it. They are
// *jsonrpc.Error values like a server's answer, so errors.As alone cannot
// tell the two apart; their codes can (jsonrpc.Error.Is compares codes).
var sdkLocalCodes = map[int64]bool{-32005: true, -32004: true, -32003: true}

// serverAnswer finds the JSON-RPC error the server itself sent in err's
// tree, skipping the SDK's local sentinels; nil means no answer came (a
// transport failure: ErrRejected, ErrConnectionClosed, ErrSessionMissing,
// a network error). A non-2xx HTTP answer whose body is a JSON-RPC error
// reaches us as that error joined with ErrRejected: the server spoke, so it
// is an answer.
func serverAnswer(err error) *jsonrpc.Error {
	if err == nil {
		return nil
	}
	if wire, ok := err.(*jsonrpc.Error); ok && !sdkLocalCodes[wire.Code] {
		return wire
	}
	switch u := err.(type) {
	case interface{ Unwrap() error }:
		return serverAnswer(u.Unwrap())
	case interface{ Unwrap() []error }:
		for _, e := range u.Unwrap() {
			if wire := serverAnswer(e); wire != nil {
				return wire
			}
		}
	}
	return nil
}

// render flattens a result's content into text for the model.
func render(res *sdk.CallToolResult) string {
	var parts []string
	for _, content := range res.Content {
		switch ct := content.(type) {
		case *sdk.TextContent:
			parts = append(parts, ct.Text)
		case *sdk.ImageContent:
			parts = append(parts, fmt.Sprintf("[image %s, %d bytes]", ct.MIMEType, len(ct.Data)))
		case *sdk.AudioContent:
			parts = append(parts, fmt.Sprintf("[audio %s, %d bytes]", ct.MIMEType, len(ct.Data)))
		default:
			if b, err := json.Marshal(content); err == nil {
				parts = append(parts, string(b))
			}
		}
	}
	if len(parts) == 0 && res.StructuredContent != nil {
		if b, err := json.Marshal(res.StructuredContent); err == nil {
			parts = append(parts, string(b))
		}
	}
	return strings.Join(parts, "\n")
}

// scrub removes the server's own secret values (header and env values)
// from a text that came from outside, before anyone sees or logs it.
// scrub removes secrets from text that came from (or about) a server: the
// one scrubber (internal/scrub), which knows every server's header and env
// values (Manager keeps them registered) and every other secret.
func (c *conn) scrub(s string) string { return scrub.String(s) }

func (c *conn) close() {
	if c.session != nil {
		_ = c.session.Close()
	}
}

// headerTransport adds the configured headers to every request.
type headerTransport struct {
	base    http.RoundTripper
	headers map[string]string
}

func (t *headerTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	for k, v := range t.headers {
		r.Header.Set(k, v)
	}
	base := t.base
	if base == nil {
		base = http.DefaultTransport
	}
	return base.RoundTrip(r)
}

// passedEnv are the gateway's variables a stdio server inherits; nothing
// else (provider keys, database passwords) leaks into the child.
var passedEnv = []string{"PATH", "HOME", "LANG", "LC_ALL", "TMPDIR", "TZ", "USER"}

func childEnv(extra map[string]string) []string {
	var env []string
	for _, k := range passedEnv {
		if v, ok := os.LookupEnv(k); ok {
			env = append(env, k+"="+v)
		}
	}
	keys := make([]string, 0, len(extra))
	for k := range extra {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		env = append(env, k+"="+extra[k])
	}
	return env
}

// tailBuffer keeps the last max bytes written (a child's stderr).
type tailBuffer struct {
	mu  sync.Mutex
	max int
	b   []byte
}

func (t *tailBuffer) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.b = append(t.b, p...)
	if len(t.b) > t.max {
		t.b = t.b[len(t.b)-t.max:]
	}
	return len(p), nil
}

func (t *tailBuffer) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return string(t.b)
}
