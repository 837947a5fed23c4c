// Package toolgrant holds the naming rules of the tools an agent may be
// granted: MCP server ids and skill names, and the allowlist patterns
// mcp__<server>__* and skill__<skill>__*. internal/mcp and internal/skills
// use them for the tools they offer, and agent definitions
// (internal/agentdef) check against them; this package is a leaf
// (standard library only) so that checking a definition, as `agentry agent
// validate` does offline, links neither the MCP client nor the skill
// runner.
package toolgrant

import (
	"regexp"
	"strings"
)

// Prefixes of the tool names offered to a model.
const (
	// MCPPrefix: mcp__<server>__<tool>.
	MCPPrefix = "mcp__"
	// SkillPrefix: skill__<skill>__<tool>.
	SkillPrefix = "skill__"
)

// mcpIDRe: lower-case letters, digits, _ and -, no "__" (the separator of
// mcp__<server>__<tool>).
var mcpIDRe = regexp.MustCompile(`^[a-z0-9][a-z0-9_-]{0,39}$`)

// skillNameRe: lower-case letters, digits and single hyphens (the Agent
// Skills naming rule), so skill__<name>__<tool> parses without ambiguity.
var skillNameRe = regexp.MustCompile(`^[a-z0-9]+(-[a-z0-9]+)*$`)

// ValidMCPServerID reports whether id can name an MCP server.
func ValidMCPServerID(id string) bool { return mcpIDRe.MatchString(id) && !strings.Contains(id, "__") }

// ValidSkillName reports whether name can be a skill's name.
func ValidSkillName(name string) bool { return skillNameRe.MatchString(name) && len(name) <= 40 }

// MCP is the allowlist entry that lets an agent use every tool of a server
// ("*" for every server): mcp__<server>__*.
func MCP(server string) string {
	if server == "*" {
		return MCPPrefix + "*"
	}
	return MCPPrefix + server + "__*"
}

// Skill is the allowlist entry for every tool of a skill.
func Skill(skill string) string { return SkillPrefix + skill + "__*" }
