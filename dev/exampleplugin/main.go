// Command exampleplugin is a complete Agentry plugin (docs/plugins.md): a
// small MCP server over stdio built with the official Go SDK. Its folder
// holds plugin.yaml; build the executable next to it:
//
//	CGO_ENABLED=0 go build -o dev/exampleplugin/greeter ./dev/exampleplugin
//
// then add the folder's parent to plugin_dirs (or copy the folder into
// <workspace>/plugins/). It offers one tool, greet {name}, answering
// "<greeting>, <name>!" where greeting comes from plugins_config.greeter
// (the JSON in AGENTRY_PLUGIN_CONFIG; "Hello" when unset).
package main

import (
	"context"
	"encoding/json"
	"fmt"
	"log"
	"os"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

type config struct {
	Greeting string `json:"greeting"`
}

type greetIn struct {
	Name string `json:"name" jsonschema:"who to greet"`
}

func main() {
	var cfg config
	if raw := os.Getenv("AGENTRY_PLUGIN_CONFIG"); raw != "" {
		if err := json.Unmarshal([]byte(raw), &cfg); err != nil {
			log.Fatalf("AGENTRY_PLUGIN_CONFIG: %v", err)
		}
	}
	if cfg.Greeting == "" {
		cfg.Greeting = "Hello"
	}
	s := mcp.NewServer(&mcp.Implementation{Name: "agentry-example-greeter", Version: "1.0.0"}, nil)
	mcp.AddTool(s, &mcp.Tool{Name: "greet", Description: "Greet someone by name."},
		func(_ context.Context, _ *mcp.CallToolRequest, in greetIn) (*mcp.CallToolResult, any, error) {
			msg := fmt.Sprintf("%s, %s!", cfg.Greeting, in.Name)
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: msg}}}, nil, nil
		})
	if err := s.Run(context.Background(), &mcp.StdioTransport{}); err != nil {
		log.Fatal(err)
	}
}
