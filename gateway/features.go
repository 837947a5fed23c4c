package gateway

import (
	"github.com/agentryhq/agentry/api"
	"github.com/agentryhq/agentry/internal/hangup"
)

// Features are the API route groups.
func (s *Services) Features() []api.Feature {
	// One watcher for every synchronous run a caller can walk away from.
	hangups := hangup.New(0)
	fs := []api.Feature{
		&api.AgentsFeature{Agents: s.Agents},
		&api.ChatFeature{Chat: s.Chat, Hangups: hangups},
		&api.ConfigFeature{Config: s.gw.Config, CostsChanged: s.costsChanged},
		&api.CostsFeature{Costs: s.Costs},
		&api.ReconciliationFeature{Runner: s.Reconciler, Store: s.gw.Store, Logger: s.log},
		&api.WorkboardFeature{Enabled: s.gw.Config.Workboard.Enabled, Store: s.gw.Store, Runs: s.TaskRuns, Events: s.Events,
			ArtifactsDir: s.gw.Config.Workspace.ArtifactsDir(), Logger: s.log},
		&api.ApprovalsFeature{Approvals: s.Approvals, Store: s.gw.Store},
		&api.EventsFeature{Bus: s.Events},
		&api.WebhooksFeature{Webhooks: s.Webhooks, Hangups: hangups},
		&api.ChannelsFeature{Channels: s.Channels, Messaging: s.Messaging, Deliveries: s.Deliveries, Store: s.gw.Store},
		&api.SchedulesFeature{Schedules: s.Schedules},
		&api.KnowledgeFeature{Knowledge: s.Knowledge},
		&api.VoiceFeature{Voice: s.Voice},
	}
	fs = append(fs, s.adminFeatures()...)
	return fs
}

// PublicFeatures are the routes outside /api/v1 that platforms call: they
// cannot carry the gateway's key and are verified by each platform's own
// scheme.
func (s *Services) PublicFeatures() []api.Feature {
	return []api.Feature{&api.IngressFeature{Channels: s.Messaging}}
}

// adminFeatures are the routes behind the agentry client's agent, memory,
// secret, log and doctor commands.
func (s *Services) adminFeatures() []api.Feature {
	fs := []api.Feature{
		&api.AgentAdminFeature{Files: s.AgentFiles, Chat: s.Chat},
		&api.MemoryFeature{Store: s.gw.Store, Memory: s.Memory},
		&api.SecretsFeature{Secrets: s.Secrets},
		&api.PluginsFeature{Plugins: s.Plugins},
		&api.MCPFeature{Registry: s.MCP},
		&api.SkillsFeature{Registry: s.Skills, Installer: s.SkillInstaller},
		&api.DiagnosticsFeature{Router: s.Router},
		&api.AgentPackagesFeature{Packages: s.packageService()},
		&api.PackageInstallsFeature{Installs: s.PackageInstalls},
		&api.BuilderFeature{Builder: s.Builder},
	}
	if s.gw.Logs != nil {
		fs = append(fs, &api.LogsFeature{Logs: s.gw.Logs})
	}
	return fs
}

// OpenAIFeature is the OpenAI-compatible endpoint (/v1, issue 51).
func (s *Services) OpenAIFeature() api.Feature {
	return &api.OpenAIFeature{Chat: s.Chat, Agents: s.Agents, Hangups: hangup.New(0)}
}

// MCPServerFeature is the gateway's MCP server (/mcp, issue 51): the
// agents as tools.
func (s *Services) MCPServerFeature(version string) api.Feature {
	return &api.MCPServerFeature{Chat: s.Chat, Agents: s.Agents, Version: version}
}
