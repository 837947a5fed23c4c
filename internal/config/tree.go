package config

import (
	"fmt"

	"gopkg.in/yaml.v3"
)

// ToTree renders the configuration as a generic map, the shape config.yaml
// has on disk (and GET /config returns).
func ToTree(c *Config) (map[string]any, error) {
	data, err := yaml.Marshal(c)
	if err != nil {
		return nil, fmt.Errorf("render config: %w", err)
	}
	var tree map[string]any
	if err := yaml.Unmarshal(data, &tree); err != nil {
		return nil, fmt.Errorf("render config: %w", err)
	}
	return tree, nil
}

// Marshal renders the configuration as YAML.
func Marshal(c *Config) ([]byte, error) { return yaml.Marshal(c) }
