package gateway

import (
	"context"
	"crypto/ed25519"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/agentryhq/agentry/internal/agentpkg"
	"github.com/agentryhq/agentry/internal/pkginstall"
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
			// The adapters this gateway has: the HTTP API and the channels
			// the delivery service knows (a channels.<x> key names no
			// adapter unless one exists; config refuses others).
			Channels: func() []string {
				out := []string{"http"}
				if s.Channels != nil {
					out = append(out, s.Channels.IDs()...)
				}
				return out
			},
			Skills: s.Skills.Names,
			// Every registered MCP server: config.yaml's mcp.<id> and
			// those registered through the API (PUT /mcp/own/{id}).
			MCPServers: func() []string {
				if s.MCP == nil {
					return nil
				}
				var ids []string
				for _, st := range s.MCP.List() {
					ids = append(ids, st.ID)
				}
				return ids
			},
			KnowledgeBases: func() []string {
				return slices.Sorted(maps.Keys(cfg.Knowledge.Bases))
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

// addPackageInstalls wires package install jobs (`agentry package install
// <git URL>`): the service behind the PackageInstall workflow's steps, its
// activities, and the resume loop that starts the workflow of any job
// recorded while Temporal was away. Packages signed by a key of a
// configured registry count as verified.
func (s *Services) addPackageInstalls(bg context.Context) {
	cfg := s.gw.Config
	var trusted []ed25519.PublicKey
	for _, r := range cfg.Registries {
		if k, err := agentpkg.ParsePublicKey(r.SigningKey); r.SigningKey != "" && err == nil {
			trusted = append(trusted, k)
		}
	}
	s.PackageInstalls = &pkginstall.Service{Store: s.gw.Store, Temporal: s.gw.Temporal, TaskQueue: cfg.Temporal.TaskQueue,
		Packages: s.packageService(), WorkDir: filepath.Join(cfg.Workspace.DataDir(), "package-installs"),
		TrustedKeys: func() []ed25519.PublicKey { return trusted }, Log: s.log, SSRF: SSRFPolicy(&cfg.Config),
		HostBuilds: pkginstall.HostBuildPolicy{Edition: cfg.Server.Edition, Catalog: cfg.PackageInstalls.HostBuildCatalog}}
	s.singleton(bg, DutyPackageInstallResume, func(ctx context.Context) { s.PackageInstalls.RunResume(ctx, PackageInstallResumeInterval) })
}

// PackageInstallResumeInterval is how often jobs without a workflow (one
// recorded while Temporal did not answer) are started again.
var PackageInstallResumeInterval = time.Minute
