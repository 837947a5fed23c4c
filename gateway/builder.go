package gateway

import (
	"github.com/agentryhq/agentry/internal/builder"
)

// addBuilder wires the agent builder (internal/builder): its catalog is
// what config.yaml and the live registries hold at each request.
func (s *Services) addBuilder() {
	s.Builder = &builder.Service{Router: s.Router, Agents: s.Agents, Files: s.AgentFiles, Ledger: s.Costs, Catalog: s.builderCatalog}
}

func (s *Services) builderCatalog() builder.Catalog {
	c := builder.CatalogFromConfig(&s.gw.Config.Config)
	if s.MCP != nil {
		for _, st := range s.MCP.Manager().Status() {
			c.MCPServers = append(c.MCPServers, st.ID)
		}
	}
	if s.Skills != nil {
		c.Skills = append(c.Skills, s.Skills.Names()...)
	}
	for _, d := range s.Agents.List() {
		c.Agents = append(c.Agents, d.ID)
	}
	c.Sort()
	return c
}
