package gateway

import (
	"context"
	"maps"
	"os"
	"path/filepath"
	"slices"

	"github.com/agentryhq/agentry/internal/agentpkg"
)

// packageService builds the agent package service: export, inspect and
// import through the agent files, with what this gateway offers for the
// missing-requirements check.
func (s *Services) packageService() *agentpkg.Service {
	cfg := s.gw.Config
	return &agentpkg.Service{
		Files:     s.AgentFiles,
		CreatedBy: "agentry gateway",
		Env: agentpkg.Environment{
			Providers: s.Router.ProviderIDs,
			Channels: func() []string {
				return append([]string{"http", "webhook"}, slices.Sorted(maps.Keys(cfg.Channels.Extra))...)
			},
			Skills: s.Skills.Names,
			MCPServers: func() []string {
				if servers, ok := cfg.MCP["servers"].(map[string]any); ok {
					return slices.Sorted(maps.Keys(servers))
				}
				return slices.Sorted(maps.Keys(cfg.MCP))
			},
			KnowledgeBases: func() []string {
				if kbs, ok := cfg.Knowledge["bases"].(map[string]any); ok {
					return slices.Sorted(maps.Keys(kbs))
				}
				return nil
			},
			Secrets: func(ctx context.Context) ([]string, error) {
				list, err := s.Secrets.List(ctx)
				if err != nil {
					return nil, err
				}
				names := make([]string, 0, len(list))
				for _, m := range list {
					names = append(names, m.Name)
				}
				return names, nil
			},
			FileExists: func(name string) bool {
				if filepath.IsAbs(name) || !filepath.IsLocal(name) {
					return false
				}
				_, err := os.Stat(filepath.Join(cfg.Workspace.Root, "files", name))
				return err == nil
			},
		},
	}
}
