// Package mcpserver is a real MCP server built with the official Go SDK,
// for tests and demos of the gateway's MCP client. It serves over stdio or
// streamable HTTP and offers tools that behave on cue:
//
//	echo {text}          returns the text
//	add {a, b}           returns the sum (typed input schema: numbers)
//	slow {seconds, tag}  waits, then returns "slept <n>s"; with a call log
//	                     it records "start <tag>" and "done <tag>" lines,
//	                     and "key <tag> <key>" when the call carries an
//	                     idempotency key in its _meta
//	idem {tag}           returns "key=<key>", the idempotency key in the
//	                     call's _meta ("" without one); with a call log it
//	                     records "key <tag> <key>"
//	fail {message}       a tool error (isError: true), never a transport one
//	grow {name}          adds a tool <name> at run time, so connected
//	                     clients get notifications/tools/list_changed
//
// Production code never imports this package.
package mcpserver

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Options shape a server.
type Options struct {
	// CallLog, when set, is a file that slow appends "start <tag>" and
	// "done <tag>" lines to, so a test can count executions across process
	// restarts.
	CallLog string
}

type echoIn struct {
	Text string `json:"text" jsonschema:"the text to echo"`
}
type addIn struct {
	A float64 `json:"a"`
	B float64 `json:"b"`
}
type slowIn struct {
	Seconds float64 `json:"seconds" jsonschema:"how long to wait"`
	Tag     string  `json:"tag,omitempty" jsonschema:"a label written to the call log"`
}
type idemIn struct {
	Tag string `json:"tag,omitempty" jsonschema:"a label written to the call log"`
}
type failIn struct {
	Message string `json:"message,omitempty"`
}
type growIn struct {
	Name string `json:"name"`
}

// New builds the server.
func New(opts Options) *mcp.Server {
	s := mcp.NewServer(&mcp.Implementation{Name: "agentry-dev-mcpserver", Version: "1.0.0"}, nil)
	var logMu sync.Mutex
	logLine := func(line string) {
		if opts.CallLog == "" {
			return
		}
		logMu.Lock()
		defer logMu.Unlock()
		f, err := os.OpenFile(opts.CallLog, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
		if err != nil {
			return
		}
		fmt.Fprintln(f, line)
		_ = f.Sync()
		_ = f.Close()
	}
	mcp.AddTool(s, &mcp.Tool{Name: "echo", Description: "Echo the text back."},
		func(_ context.Context, _ *mcp.CallToolRequest, in echoIn) (*mcp.CallToolResult, any, error) {
			return text(in.Text), nil, nil
		})
	mcp.AddTool(s, &mcp.Tool{Name: "add", Description: "Add two numbers."},
		func(_ context.Context, _ *mcp.CallToolRequest, in addIn) (*mcp.CallToolResult, any, error) {
			return text(fmt.Sprint(in.A + in.B)), nil, nil
		})
	mcp.AddTool(s, &mcp.Tool{Name: "slow", Description: "Wait some seconds, then answer."},
		func(ctx context.Context, req *mcp.CallToolRequest, in slowIn) (*mcp.CallToolResult, any, error) {
			if key := IdempotencyKey(req); key != "" {
				logLine("key " + in.Tag + " " + key)
			}
			logLine("start " + in.Tag)
			select {
			case <-time.After(time.Duration(in.Seconds * float64(time.Second))):
			case <-ctx.Done():
				return nil, nil, ctx.Err()
			}
			logLine("done " + in.Tag)
			return text(fmt.Sprintf("slept %gs", in.Seconds)), nil, nil
		})
	mcp.AddTool(s, &mcp.Tool{Name: "idem", Description: "Tell the idempotency key the call carries."},
		func(_ context.Context, req *mcp.CallToolRequest, in idemIn) (*mcp.CallToolResult, any, error) {
			key := IdempotencyKey(req)
			logLine("key " + in.Tag + " " + key)
			return text("key=" + key), nil, nil
		})
	mcp.AddTool(s, &mcp.Tool{Name: "fail", Description: "Always fails with a tool error."},
		func(_ context.Context, _ *mcp.CallToolRequest, in failIn) (*mcp.CallToolResult, any, error) {
			msg := in.Message
			if msg == "" {
				msg = "failed on cue"
			}
			return nil, nil, errors.New(msg)
		})
	mcp.AddTool(s, &mcp.Tool{Name: "grow", Description: "Add a tool with the given name."},
		func(_ context.Context, _ *mcp.CallToolRequest, in growIn) (*mcp.CallToolResult, any, error) {
			name := in.Name
			mcp.AddTool(s, &mcp.Tool{Name: name, Description: "Added at run time."},
				func(context.Context, *mcp.CallToolRequest, struct{}) (*mcp.CallToolResult, any, error) {
					return text(name + " ran"), nil, nil
				})
			return text("added " + name), nil, nil
		})
	return s
}

// MetaIdempotencyKey is the _meta key the gateway sends a call's
// idempotency key under (internal/mcp.MetaIdempotencyKey, which cannot be
// imported here: its tests import this package; they check the two agree
// by calling idem).
const MetaIdempotencyKey = "io.github.agentryhq/idempotency-key"

// IdempotencyKey is the idempotency key in a tools/call request's _meta.
func IdempotencyKey(req *mcp.CallToolRequest) string {
	if req == nil || req.Params == nil {
		return ""
	}
	key, _ := req.Params.Meta[MetaIdempotencyKey].(string)
	return key
}

func text(s string) *mcp.CallToolResult {
	return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: s}}}
}

// RunStdio serves s over stdin/stdout until the client goes away.
func RunStdio(ctx context.Context, s *mcp.Server) error {
	return s.Run(ctx, &mcp.StdioTransport{})
}

// Handler serves s over streamable HTTP (one session per client).
func Handler(s *mcp.Server) http.Handler {
	return mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s }, nil)
}

// NewMalformed builds a server whose tool list a client must refuse: its
// one tool has an input schema that says "object" (all the SDK checks)
// but whose property type is not a JSON Schema type name.
func NewMalformed() *mcp.Server {
	s := mcp.NewServer(&mcp.Implementation{Name: "agentry-dev-malformed", Version: "1.0.0"}, nil)
	schema := map[string]any{"type": "object", "properties": map[string]any{"a": map[string]any{"type": 42}}}
	s.AddTool(&mcp.Tool{Name: "broken", InputSchema: schema},
		func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) { return text("never"), nil })
	return s
}
