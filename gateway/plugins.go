package gateway

import (
	"path/filepath"
	"time"

	"github.com/agentryhq/agentry/internal/plugins"
)

// PluginWatchInterval is how often plugin folders are rescanned.
var PluginWatchInterval = 2 * time.Second

// addPlugins loads the plugins of the workspace plugins/ folder and
// plugin_dirs, confined by the skills' jail and connected through the MCP
// manager (internal/plugins, docs/plugins.md), and rescans them.
func (s *Services) addPlugins() {
	cfg := s.gw.Config
	caps := SandboxCaps(&cfg.Config)
	// A plugin lives as long as the gateway: its CPU time is bounded by the
	// runtime.sandbox cap times 360 (an hour for the default 10s), not per call.
	caps.CPUTime *= 360
	s.Plugins = &plugins.Registry{
		Dirs:    append([]string{cfg.Workspace.PluginsDir()}, cfg.PluginDirs...),
		Config:  cfg.PluginsConfig,
		Jail:    s.Jail,
		Caps:    caps,
		WorkDir: filepath.Join(cfg.Workspace.DataDir(), "plugins"),
		Servers: s.Toolbox.MCP,
		Log:     s.log,
	}
	s.Plugins.Rescan(s.bg)
	go s.Plugins.Watch(s.bg, PluginWatchInterval)
}
