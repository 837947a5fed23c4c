package mcp

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"

	"github.com/agentryhq/agentry/internal/fault"
	"github.com/agentryhq/agentry/internal/secrets"
	"github.com/agentryhq/agentry/models"
)

// ErrNotFound: no server registered through the API has that id.
var ErrNotFound = fault.NotFound("mcp server not found")

// ConfigOwnedError: the id is defined in config.yaml, which the API does
// not edit (409).
type ConfigOwnedError struct{ ServerID string }

func (e *ConfigOwnedError) Error() string {
	return fmt.Sprintf("mcp server %s is defined in config.yaml (mcp.%s); change it there", e.ServerID, e.ServerID)
}

// Fault implements fault.Fault: 409 conflict, naming the server.
func (e *ConfigOwnedError) Fault() fault.Detail {
	return fault.Detail{Kind: fault.KindConflict, Code: "conflict", Message: e.Error(), Fields: map[string]any{"server": e.ServerID}}
}

// Registry is the durable side of the servers: config servers plus the
// ones registered through the API (stored with sealed secrets), all
// connected through one Manager.
type Registry struct {
	store   models.MCPStore
	secrets *secrets.Store
	manager *Manager

	mu        sync.Mutex // one registration change at a time
	configIDs map[string]bool
}

// NewRegistry builds the registry over a manager.
func NewRegistry(store models.MCPStore, sec *secrets.Store, m *Manager) *Registry {
	return &Registry{store: store, secrets: sec, manager: m, configIDs: map[string]bool{}}
}

// Manager is the connection manager.
func (r *Registry) Manager() *Manager { return r.manager }

// Load starts connecting (in the background) to the config servers and the
// stored registrations. A stored registration that cannot be read is
// reported and skipped; it never stops the gateway.
func (r *Registry) Load(ctx context.Context, fromConfig []Spec) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, s := range fromConfig {
		r.configIDs[s.ID] = true
		r.manager.Add(s)
	}
	rows, err := r.store.ListMCPServers(ctx)
	if err != nil {
		return fmt.Errorf("list mcp servers: %w", err)
	}
	var errs []error
	for _, row := range rows {
		if r.configIDs[row.ID] {
			errs = append(errs, fmt.Errorf("mcp server %s: registered through the API and defined in config.yaml; config.yaml wins", row.ID))
			continue
		}
		spec, err := r.unseal(row)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		r.manager.Add(spec)
	}
	return errors.Join(errs...)
}

type sealedPart struct {
	Headers map[string]string `json:"headers,omitempty"`
	Env     map[string]string `json:"env,omitempty"`
}

func label(id string) string { return "mcp-server:" + id }

func (r *Registry) unseal(row models.MCPServer) (Spec, error) {
	s := Spec{ID: row.ID, Transport: row.Transport, URL: row.URL, Command: row.Command, Source: SourceAPI}
	if row.Args != "" {
		if err := json.Unmarshal([]byte(row.Args), &s.Args); err != nil {
			return s, fmt.Errorf("mcp server %s: stored args: %w", row.ID, err)
		}
	}
	if len(row.Sealed) > 0 {
		plain, err := r.secrets.Open(label(row.ID), secrets.Sealed{KeyID: row.KeyID, Nonce: row.Nonce, Ciphertext: row.Sealed})
		if err != nil {
			return s, fmt.Errorf("mcp server %s: %w", row.ID, err)
		}
		var part sealedPart
		if err := json.Unmarshal(plain, &part); err != nil {
			return s, fmt.Errorf("mcp server %s: stored secrets are not readable", row.ID)
		}
		s.Headers, s.Env = part.Headers, part.Env
	}
	return s, nil
}

// Put registers or updates a server: shape, policy, then the server is
// contacted and its tools listed; only then is it stored (secrets sealed)
// and put in use, replacing the earlier connection. Repeating the same Put
// gives the same state. created is true when the id was new.
func (r *Registry) Put(ctx context.Context, spec Spec) (created bool, st ServerStatus, err error) {
	spec.Source = SourceAPI
	if err := spec.Validate(); err != nil {
		return false, st, err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.configIDs[spec.ID] {
		return false, st, &ConfigOwnedError{ServerID: spec.ID}
	}
	spec, err = r.manager.Policy().CheckRegistration(spec)
	if err != nil {
		return false, st, err
	}
	r.manager.RegisterSecrets(spec)
	pending, err := r.manager.Dial(ctx, spec)
	if err != nil {
		return false, st, err
	}
	row := models.MCPServer{ID: spec.ID, Transport: spec.Transport, URL: spec.URL, Command: spec.Command}
	if len(spec.Args) > 0 {
		b, _ := json.Marshal(spec.Args)
		row.Args = string(b)
	}
	if len(spec.Headers) > 0 || len(spec.Env) > 0 {
		plain, _ := json.Marshal(sealedPart{Headers: spec.Headers, Env: spec.Env})
		sealed, err := r.secrets.Seal(label(spec.ID), plain)
		if err != nil {
			pending.Discard()
			return false, st, err
		}
		row.KeyID, row.Nonce, row.Sealed = sealed.KeyID, sealed.Nonce, sealed.Ciphertext
	}
	if created, err = r.store.PutMCPServer(ctx, &row); err != nil {
		pending.Discard()
		return false, st, fmt.Errorf("store mcp server %s: %w", spec.ID, err)
	}
	r.manager.Install(pending)
	st, _ = r.manager.Get(spec.ID)
	return created, st, nil
}

// Delete removes a server registered through the API.
func (r *Registry) Delete(ctx context.Context, id string) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.configIDs[id] {
		return &ConfigOwnedError{ServerID: id}
	}
	err := r.store.DeleteMCPServer(ctx, id)
	if errors.Is(err, models.ErrNotFound) {
		return fmt.Errorf("%w: %s", ErrNotFound, id)
	}
	if err != nil {
		return fmt.Errorf("delete mcp server %s: %w", id, err)
	}
	r.manager.Remove(id)
	return nil
}

// Get is one server's status (config or API).
func (r *Registry) Get(id string) (ServerStatus, error) {
	st, ok := r.manager.Get(id)
	if !ok {
		return st, fmt.Errorf("%w: %s", ErrNotFound, id)
	}
	return st, nil
}

// List is every server's status.
func (r *Registry) List() []ServerStatus { return r.manager.Status() }
