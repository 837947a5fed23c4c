package secrets

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/vault/api"

	"github.com/agentryhq/agentry/dev/fakekms"
	"github.com/agentryhq/agentry/dev/fakevault"
	"github.com/agentryhq/agentry/internal/config"
	"github.com/agentryhq/agentry/internal/fault"
	"github.com/agentryhq/agentry/models"
)

func startVault(t testing.TB) *fakevault.Server {
	t.Helper()
	v, err := fakevault.Listen("127.0.0.1:0", "s3cret-vault-token")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { v.Close() })
	return v
}

func vaultCreds(v *fakevault.Server) config.CredentialsConfig {
	return config.CredentialsConfig{Provider: "hashivault", KeyURL: "hashivault://agentry", VaultAddress: v.URL(), Timeout: 2 * time.Second}
}

// vaultStore is a gateway's store with the hashivault provider (a new one
// each call: a restarted gateway, nothing cached).
func vaultStore(t testing.TB, db models.SecretStore, creds string, c config.CredentialsConfig, token string, now func() time.Time) *Store {
	t.Helper()
	o, err := OpenProvider(context.Background(), c, func(k string) string {
		if k == "VAULT_TOKEN" {
			return token
		}
		return ""
	})
	if err != nil {
		t.Fatal(err)
	}
	o.Now = now
	return NewWith(db, creds, o)
}

func TestVaultSecretsSurviveARestart(t *testing.T) {
	ctx := context.Background()
	db, creds := openStore(t)
	v := startVault(t)
	const value = "sk-vault-sealed-value"
	if err := vaultStore(t, db, creds, vaultCreds(v), v.Token(), nil).Set(ctx, "OPENAI_KEY", value); err != nil {
		t.Fatal(err)
	}
	got, err := vaultStore(t, db, creds, vaultCreds(v), v.Token(), nil).Reveal(ctx, "OPENAI_KEY")
	if err != nil || got != value {
		t.Fatalf("after restart: %q, %v", got, err)
	}
	keys, _ := db.ListSecretKeys(ctx)
	if len(keys) != 1 || keys[0].Provider != "hashivault://agentry" || !strings.HasPrefix(string(keys[0].Wrapped), "vault:v1:") {
		t.Fatalf("data keys = %+v; want one wrapped by Vault", keys)
	}
	if v.Calls("encrypt") != 1 || v.Calls("decrypt") < 1 {
		t.Fatalf("vault encrypt %d, decrypt %d", v.Calls("encrypt"), v.Calls("decrypt"))
	}
	// Neither the key file nor a clear value: the data key is only wrapped.
	sec, _ := db.GetSecret(ctx, "OPENAI_KEY")
	if !strings.HasPrefix(sec.KeyID, DataKeyPrefix) || strings.Contains(string(sec.Ciphertext), value) {
		t.Fatalf("stored row %q", sec.KeyID)
	}
}

func TestVaultRotationRewrapsWithoutDowntime(t *testing.T) {
	ctx := context.Background()
	db, creds := openStore(t)
	v := startVault(t)
	s := vaultStore(t, db, creds, vaultCreds(v), v.Token(), nil)
	if err := s.Set(ctx, "A", "alpha"); err != nil {
		t.Fatal(err)
	}
	// The operator rotates the transit key, with the Vault client.
	vc, err := api.NewClient(&api.Config{Address: v.URL()})
	if err != nil {
		t.Fatal(err)
	}
	vc.SetToken(v.Token())
	if _, err := vc.Logical().Write("transit/keys/agentry/rotate", nil); err != nil {
		t.Fatal(err)
	}
	// Readers keep reading while the re-wrap runs.
	stop := make(chan struct{})
	var wg sync.WaitGroup
	var readErr error
	wg.Add(1)
	go func() {
		defer wg.Done()
		r := vaultStore(t, db, creds, vaultCreds(v), v.Token(), nil)
		for {
			select {
			case <-stop:
				return
			default:
			}
			if got, err := r.Reveal(ctx, "A"); err != nil || got != "alpha" {
				readErr = errors.Join(readErr, err)
				return
			}
		}
	}()
	res, err := s.Rotate(ctx)
	close(stop)
	wg.Wait()
	if err != nil || res.Rewrapped != 1 {
		t.Fatalf("rotate = %+v, %v", res, err)
	}
	if readErr != nil {
		t.Fatalf("a read during rotation failed: %v", readErr)
	}
	keys, _ := db.ListSecretKeys(ctx)
	if !strings.HasPrefix(string(keys[0].Wrapped), "vault:v2:") || keys[0].RewrappedAt == nil {
		t.Fatalf("data key not re-wrapped with version 2: %.12s", keys[0].Wrapped)
	}
	// Version 1 retired in Vault: a restarted gateway still reads.
	if _, err := vc.Logical().Write("transit/keys/agentry/config", map[string]any{"min_decryption_version": 2}); err != nil {
		t.Fatal(err)
	}
	got, err := vaultStore(t, db, creds, vaultCreds(v), v.Token(), nil).Reveal(ctx, "A")
	if err != nil || got != "alpha" {
		t.Fatalf("after retiring v1: %q, %v", got, err)
	}
}

func TestVaultUnreachableCachedKeysServeReadsForTheTTL(t *testing.T) {
	ctx := context.Background()
	db, creds := openStore(t)
	v := startVault(t)
	var mu sync.Mutex
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	c := vaultCreds(v)
	c.CacheTTL = 10 * time.Minute
	s := vaultStore(t, db, creds, c, v.Token(), clock)
	if err := s.Set(ctx, "A", "alpha"); err != nil {
		t.Fatal(err)
	}
	v.SetDown(true)
	mu.Lock()
	now = now.Add(9 * time.Minute)
	mu.Unlock()
	if got, err := s.Reveal(ctx, "A"); err != nil || got != "alpha" {
		t.Fatalf("cached read while Vault is down: %q, %v", got, err)
	}
	err := s.Set(ctx, "B", "beta")
	var pe *ProviderError
	if !errors.As(err, &pe) || !strings.Contains(err.Error(), "credentials provider hashivault") {
		t.Fatalf("write while Vault is down = %v; want a ProviderError", err)
	}
	if f, ok := fault.As(err); !ok || f.Fault().Kind != fault.KindUnavailable {
		t.Fatalf("write error is not a 503: %v", err)
	}
	if _, err := db.GetSecret(ctx, "B"); !errors.Is(err, models.ErrNotFound) {
		t.Fatalf("a failed write left a row: %v", err)
	}
	mu.Lock()
	now = now.Add(2 * time.Minute) // 11 minutes since Vault last gave the key
	mu.Unlock()
	if _, err := s.Reveal(ctx, "A"); err == nil || !strings.Contains(err.Error(), "cache_ttl is 10m0s") {
		t.Fatalf("read after the TTL with Vault down = %v; want the expired cache named", err)
	}
	v.SetDown(false)
	if got, err := s.Reveal(ctx, "A"); err != nil || got != "alpha" {
		t.Fatalf("Vault back: %q, %v", got, err)
	}
	if err := s.Set(ctx, "B", "beta"); err != nil {
		t.Fatalf("write with Vault back: %v", err)
	}
}

func TestVaultWrongTokenIsRefusedAndNothingWritten(t *testing.T) {
	ctx := context.Background()
	db, creds := openStore(t)
	v := startVault(t)
	err := vaultStore(t, db, creds, vaultCreds(v), "not-the-token", nil).Set(ctx, "A", "alpha")
	if err == nil || !strings.Contains(err.Error(), "permission denied") || strings.Contains(err.Error(), "not-the-token") {
		t.Fatalf("wrong token = %v; want Vault's permission denied, without the token", err)
	}
	keys, _ := db.ListSecretKeys(ctx)
	list, _ := db.ListSecrets(ctx)
	if len(keys) != 0 || len(list) != 0 {
		t.Fatalf("written with a wrong token: %d keys, %d secrets", len(keys), len(list))
	}
	if _, err := OpenProvider(ctx, vaultCreds(v), func(string) string { return "" }); err == nil || !strings.Contains(err.Error(), "VAULT_TOKEN") {
		t.Fatalf("no token = %v", err)
	}
}

func TestSwitchingProviderNamesTheOtherProvider(t *testing.T) {
	ctx := context.Background()
	db, creds := openStore(t)
	v := startVault(t)
	if err := vaultStore(t, db, creds, vaultCreds(v), v.Token(), nil).Set(ctx, "A", "alpha"); err != nil {
		t.Fatal(err)
	}
	_, err := New(db, creds).Reveal(ctx, "A")
	if !errors.Is(err, ErrWrongKey) || !strings.Contains(err.Error(), "wrapped by hashivault://agentry") {
		t.Fatalf("local reading a Vault-wrapped value = %v", err)
	}
}

// A workspace written before data keys (values sealed with the key file
// itself) still reads, and rotate moves its values to a data key.
func TestKeyFileValuesStillOpenAndRotateReseals(t *testing.T) {
	ctx := context.Background()
	db, creds := openStore(t)
	s := New(db, creds)
	aead, fileID, err := s.fileCipher()
	if err != nil {
		t.Fatal(err)
	}
	nonce, ct, _ := seal(aead, []byte("old-value"), "OLD")
	if err := db.PutSecret(ctx, &models.Secret{Name: "OLD", KeyID: fileID, Nonce: nonce, Ciphertext: ct}); err != nil {
		t.Fatal(err)
	}
	if got, err := New(db, creds).Reveal(ctx, "OLD"); err != nil || got != "old-value" {
		t.Fatalf("key-file value: %q, %v", got, err)
	}
	res, err := New(db, creds).Rotate(ctx)
	if err != nil || res.Resealed != 1 {
		t.Fatalf("rotate = %+v, %v", res, err)
	}
	sec, _ := db.GetSecret(ctx, "OLD")
	if !strings.HasPrefix(sec.KeyID, DataKeyPrefix) {
		t.Fatalf("not re-sealed: key id %q", sec.KeyID)
	}
	if got, err := New(db, creds).Reveal(ctx, "OLD"); err != nil || got != "old-value" {
		t.Fatalf("after re-seal: %q, %v", got, err)
	}
}

// The cloud keepers open by URL without contacting anything (they are
// linked; a call fails at the first wrap without the cloud's credentials).
func TestCloudKeepersOpenByURL(t *testing.T) {
	for _, c := range []config.CredentialsConfig{
		{Provider: "awskms", KeyURL: "awskms://alias/agentry?region=eu-west-1"},
		{Provider: "gcpkms", KeyURL: "gcpkms://projects/p/locations/global/keyRings/r/cryptoKeys/agentry"},
		{Provider: "azurekeyvault", KeyURL: "azurekeyvault://myvault.vault.azure.net/keys/agentry"},
	} {
		o, err := OpenProvider(context.Background(), c, nil)
		if err != nil {
			t.Logf("%s: %v (needs the cloud's credentials to open)", c.Provider, err)
			continue
		}
		if o.Keeper == nil || strings.Contains(o.KeyURL, "?") {
			t.Errorf("%s: keeper %v, key url %q", c.Provider, o.Keeper, o.KeyURL)
		}
	}
}

// AWS KMS exercised: the real AWS SDK (gocloud.dev/secrets/awskms) against
// dev/fakekms by the URL's endpoint; a restart reads back, a wrong access
// key is refused and writes nothing.
func TestAWSKMSAgainstTheFake(t *testing.T) {
	ctx := context.Background()
	k, err := fakekms.Listen("127.0.0.1:0", "AKIAFAKEKMS")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { k.Close() })
	t.Setenv("AWS_ACCESS_KEY_ID", "AKIAFAKEKMS")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "fake-secret")
	t.Setenv("AWS_EC2_METADATA_DISABLED", "true")
	c := config.CredentialsConfig{Provider: "awskms", KeyURL: "awskms://alias/agentry?region=us-east-1&endpoint=" + k.URL(), Timeout: 5 * time.Second}
	db, creds := openStore(t)
	open := func() *Store {
		o, err := OpenProvider(ctx, c, nil)
		if err != nil {
			t.Fatal(err)
		}
		return NewWith(db, creds, o)
	}
	if err := open().Set(ctx, "A", "alpha"); err != nil {
		t.Fatal(err)
	}
	if got, err := open().Reveal(ctx, "A"); err != nil || got != "alpha" {
		t.Fatalf("after restart: %q, %v", got, err)
	}
	keys, _ := db.ListSecretKeys(ctx)
	if len(keys) != 1 || keys[0].Provider != "awskms://alias/agentry" || k.Calls("Encrypt") != 1 || k.Calls("Decrypt") < 1 {
		t.Fatalf("keys %+v, encrypt %d decrypt %d", keys, k.Calls("Encrypt"), k.Calls("Decrypt"))
	}
	if res, err := open().Rotate(ctx); err != nil || res.Rewrapped != 1 {
		t.Fatalf("rotate = %+v, %v", res, err)
	}
	t.Setenv("AWS_ACCESS_KEY_ID", "AKIAWRONG")
	err = open().Set(ctx, "B", "beta")
	var pe *ProviderError
	if !errors.As(err, &pe) || !strings.Contains(err.Error(), "UnrecognizedClientException") {
		t.Fatalf("wrong access key = %v", err)
	}
	if _, err := db.GetSecret(ctx, "B"); !errors.Is(err, models.ErrNotFound) {
		t.Fatal("a refused write left a row")
	}
}
