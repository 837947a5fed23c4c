package apiclient

import (
	"context"

	"github.com/agentryhq/agentry/internal/apiclient/openapi"
)

// PluginList is GET /plugins and POST /plugins/rescan.
type PluginList struct {
	Raw
	openapi.PluginList
}

// Plugins lists the plugins, loaded or not.
func (c *Client) Plugins(ctx context.Context) (*PluginList, error) {
	var l PluginList
	resp, err := c.api.GetPlugins(ctx)
	return &l, c.read(ctx, "GET /plugins", resp, err, &l)
}

// RescanPlugins rescans the plugin folders, then lists them.
func (c *Client) RescanPlugins(ctx context.Context) (*PluginList, error) {
	var l PluginList
	resp, err := c.api.PostPluginsRescan(ctx)
	return &l, c.read(ctx, "POST /plugins/rescan", resp, err, &l)
}
