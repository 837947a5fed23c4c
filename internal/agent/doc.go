// Package agent holds the agent loop that every surface (chat, webhooks,
// task runs, schedules) drives through an Executor, and its tools (the
// Toolbox: builtins, MCP servers, skills). Agent definitions, their
// registry and their files are internal/agentdef, a leaf the CLI links
// without the server.
package agent
