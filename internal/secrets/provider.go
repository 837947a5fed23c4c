package secrets

import (
	"context"
	"fmt"
	"net/url"
	"os"
	"path"
	"strings"

	"github.com/hashicorp/vault/api"
	gcsecrets "gocloud.dev/secrets"
	"gocloud.dev/secrets/hashivault"

	// The cloud KMS keepers, opened by URL (awskms://, gcpkms://,
	// azurekeyvault://) with each cloud's default credential chain.
	_ "gocloud.dev/secrets/awskms"
	_ "gocloud.dev/secrets/azurekeyvault"
	_ "gocloud.dev/secrets/gcpkms"

	"github.com/agentryhq/agentry/internal/config"
)

// OpenProvider makes the Options of credentials c (config.Validate has
// refused an unknown provider and a key URL of another scheme). getenv
// reads the environment (os.Getenv when nil). Nothing is contacted here:
// a provider that is down fails the first wrap or unwrap, clearly.
func OpenProvider(ctx context.Context, c config.CredentialsConfig, getenv func(string) string) (Options, error) {
	if getenv == nil {
		getenv = os.Getenv
	}
	o := Options{Provider: c.Provider, CacheTTL: c.CacheTTL, Timeout: c.Timeout}
	if o.Timeout <= 0 {
		o.Timeout = DefaultTimeout
	}
	switch c.Provider {
	case "", "local":
		o.Provider = "local"
		return o, nil
	case "hashivault":
		u, err := url.Parse(c.KeyURL)
		if err != nil || u.Scheme != "hashivault" || u.Host == "" {
			return o, fmt.Errorf("credentials.key_url: want hashivault://<transit key name>, got %q", c.KeyURL)
		}
		addr := c.VaultAddress
		if addr == "" {
			addr = getenv("VAULT_ADDR")
		}
		if addr == "" {
			return o, fmt.Errorf("credentials.vault_address: provider hashivault needs Vault's address (or VAULT_ADDR)")
		}
		token, err := vaultToken(c, getenv)
		if err != nil {
			return o, err
		}
		// A plain client: address and token from credentials.*, TLS with the system roots.
		client, err := hashivault.Dial(ctx, &hashivault.Config{Token: token, APIConfig: api.Config{Address: addr, Timeout: o.Timeout, MaxRetries: 1}})
		if err != nil {
			return o, fmt.Errorf("credentials.vault_address %s: %w", addr, err)
		}
		engine := u.Query().Get("engine")
		if engine == "" {
			engine = "transit"
		}
		name := path.Join(u.Host, u.Path)
		o.Keeper = hashivault.OpenKeeper(client, name, &hashivault.KeeperOptions{Engine: engine})
		o.KeyURL = "hashivault://" + name
		if engine != "transit" {
			o.KeyURL += "?engine=" + engine
		}
		return o, nil
	case "awskms", "gcpkms", "azurekeyvault":
		k, err := gcsecrets.OpenKeeper(ctx, c.KeyURL)
		if err != nil {
			return o, fmt.Errorf("credentials.key_url: %w", err)
		}
		o.Keeper = k
		u, _ := url.Parse(c.KeyURL)
		u.RawQuery, u.User = "", nil // the key, not the client's settings
		o.KeyURL = u.String()
		return o, nil
	}
	return o, fmt.Errorf("credentials.provider: unknown provider %q (use %s)", c.Provider, strings.Join(config.CredentialProviders, ", "))
}

// vaultToken reads credentials.vault_token_file, else the variable named
// by credentials.vault_token_env (VAULT_TOKEN).
func vaultToken(c config.CredentialsConfig, getenv func(string) string) (string, error) {
	if c.VaultTokenFile != "" {
		b, err := os.ReadFile(c.VaultTokenFile)
		if err != nil {
			return "", fmt.Errorf("credentials.vault_token_file: %w", err)
		}
		if t := strings.TrimSpace(string(b)); t != "" {
			return t, nil
		}
		return "", fmt.Errorf("credentials.vault_token_file %s is empty", c.VaultTokenFile)
	}
	env := c.VaultTokenEnv
	if env == "" {
		env = "VAULT_TOKEN"
	}
	if t := getenv(env); t != "" {
		return t, nil
	}
	return "", fmt.Errorf("credentials: provider hashivault needs a Vault token: set %s or credentials.vault_token_file", env)
}
