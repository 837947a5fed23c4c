package client

import (
	"context"
	"net/http"
	"net/url"
)

// MCPServerSpec is the body of PUT /mcp/own/{id}.
type MCPServerSpec struct {
	Transport string            `json:"transport"`
	URL       string            `json:"url,omitempty"`
	Headers   map[string]string `json:"headers,omitempty"`
	Command   string            `json:"command,omitempty"`
	Args      []string          `json:"args,omitempty"`
	Env       map[string]string `json:"env,omitempty"`
}

// MCPServer is a server's status: header and env names only, never values.
type MCPServer struct {
	Raw
	ID        string   `json:"id"`
	Transport string   `json:"transport"`
	URL       string   `json:"url,omitempty"`
	Command   string   `json:"command,omitempty"`
	Args      []string `json:"args,omitempty"`
	Headers   []string `json:"headers,omitempty"`
	Env       []string `json:"env,omitempty"`
	Source    string   `json:"source"`
	Status    string   `json:"status"`
	Tools     []string `json:"tools"`
	Error     string   `json:"error,omitempty"`
}

// MCPServerList is GET /mcp/own.
type MCPServerList struct {
	Raw
	Servers []MCPServer `json:"servers"`
}

// PutMCPServer registers or updates a server; the gateway contacts it and
// lists its tools before answering.
func (c *Client) PutMCPServer(ctx context.Context, id string, spec MCPServerSpec) (*MCPServer, error) {
	var s MCPServer
	return &s, c.Do(ctx, http.MethodPut, "/mcp/own/"+url.PathEscape(id), spec, &s)
}

// MCPServers lists every server.
func (c *Client) MCPServers(ctx context.Context) (*MCPServerList, error) {
	var l MCPServerList
	return &l, c.Do(ctx, http.MethodGet, "/mcp/own", nil, &l)
}

// DeleteMCPServer removes a server registered through the API.
func (c *Client) DeleteMCPServer(ctx context.Context, id string) error {
	return c.Do(ctx, http.MethodDelete, "/mcp/own/"+url.PathEscape(id), nil, nil)
}
