package config

import (
	"fmt"
	"os"
	"path/filepath"

	"sigs.k8s.io/yaml"
)

// Load reads the manager's configuration file, applies defaults and validates it. An empty path
// yields the defaults. Unknown fields are errors, so a misspelt key is never ignored.
func Load(path string) (*Configuration, error) {
	c := &Configuration{}
	if err := decodeFile(path, c); err != nil {
		return nil, err
	}
	c.SetDefaults()
	if errs := c.Validate(); len(errs) > 0 {
		return nil, fmt.Errorf("config file %q: %w", path, errs.ToAggregate())
	}
	return c, nil
}

// LoadAgent reads the agent's configuration file, applies defaults and validates it; clusterName,
// when not empty, overrides the file's (it is usually given as a flag).
func LoadAgent(path, clusterName string) (*AgentConfiguration, error) {
	c := &AgentConfiguration{}
	if err := decodeFile(path, c); err != nil {
		return nil, err
	}
	if clusterName != "" {
		c.ClusterName = clusterName
	}
	c.SetDefaults()
	if errs := c.Validate(); len(errs) > 0 {
		return nil, fmt.Errorf("config file %q: %w", path, errs.ToAggregate())
	}
	return c, nil
}

func decodeFile(path string, into any) error {
	if path == "" {
		return nil
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("reading config file: %w", err)
	}
	if err := yaml.UnmarshalStrict(data, into); err != nil {
		return fmt.Errorf("config file %q: %w", path, err)
	}
	return nil
}

// Write saves a Configuration or AgentConfiguration as the YAML file Load or LoadAgent reads
// (for a component's --config flag), creating the directory, and returns the path.
func Write(path string, cfg any) (string, error) {
	data, err := yaml.Marshal(cfg)
	if err != nil {
		return "", fmt.Errorf("config %s: %w", path, err)
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return "", fmt.Errorf("config %s: %w", path, err)
	}
	if err := os.WriteFile(path, data, 0o644); err != nil {
		return "", fmt.Errorf("config %s: %w", path, err)
	}
	return path, nil
}
