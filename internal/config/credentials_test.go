package config

import (
	"strings"
	"testing"
)

// An unknown credentials provider refuses the start naming the key; a
// known one needs its key URL, of its own scheme.
func TestCredentialsProviderIsValidated(t *testing.T) {
	for _, tc := range []struct {
		c    CredentialsConfig
		want string // "" = accepted
	}{
		{CredentialsConfig{Provider: "local"}, ""},
		{CredentialsConfig{Provider: "vault"}, `credentials.provider: unknown provider "vault" (use local, hashivault, awskms, gcpkms, azurekeyvault)`},
		{CredentialsConfig{Provider: "hashivault"}, "credentials.key_url: provider hashivault needs the key's URL"},
		{CredentialsConfig{Provider: "hashivault", KeyURL: "awskms://alias/x"}, "credentials.key_url: must be a hashivault:// URL"},
		{CredentialsConfig{Provider: "hashivault", KeyURL: "hashivault://agentry"}, ""},
		{CredentialsConfig{Provider: "awskms", KeyURL: "awskms://alias/agentry?region=eu-west-1"}, ""},
		{CredentialsConfig{Provider: "local", KeyURL: "hashivault://agentry"}, "credentials.key_url: is read by the hashivault and cloud KMS providers only"},
		{CredentialsConfig{Provider: "local", CacheTTL: -1}, "credentials.cache_ttl: must not be negative"},
	} {
		c := Defaults()
		c.Credentials = tc.c
		err := Validate(&c)
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%+v refused: %v", tc.c, err)
		case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("%+v = %v; want %q", tc.c, err, tc.want)
		}
	}
}
