// Package fakevault is a fake HashiCorp Vault (or OpenBao) on 127.0.0.1
// for tests: real HTTP speaking the transit secrets engine's API under
// /v1/transit, so the real Vault client (github.com/hashicorp/vault/api,
// through gocloud.dev/secrets/hashivault) can be pointed at it by address.
//
//	POST|PUT /v1/transit/encrypt/:name     {"plaintext": base64}   -> {"data": {"ciphertext": "vault:v1:...", "key_version": 1}}
//	POST|PUT /v1/transit/decrypt/:name     {"ciphertext": "vault:vN:..."} -> {"data": {"plaintext": base64}}
//	POST|PUT /v1/transit/rewrap/:name      {"ciphertext"}          -> {"data": {"ciphertext": "vault:vLATEST:..."}}
//	POST|PUT /v1/transit/keys/:name        create (encrypt also creates, as Vault's default policy allows)
//	POST|PUT /v1/transit/keys/:name/rotate a new key version; new encryptions use it
//	POST|PUT /v1/transit/keys/:name/config {"min_decryption_version": n}
//	GET      /v1/transit/keys/:name        latest_version, min_decryption_version, keys
//
// Every request needs the token in X-Vault-Token; a wrong or missing one
// is answered 403 {"errors": ["permission denied"]}, as Vault does.
// Ciphertexts are AES-256-GCM under the named key's version, like
// Vault's aes256-gcm96 keys. SetDown makes the server drop every
// connection (a Vault that is unreachable). Safe for concurrent use.
package fakevault

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// DefaultToken is the root token of a server started without one.
const DefaultToken = "fake-root-token"

// Server is a running fake Vault.
type Server struct {
	token string
	ln    net.Listener
	srv   *http.Server

	down  atomic.Bool
	calls sync.Map // operation ("encrypt", "decrypt", ...) -> *atomic.Int64

	mu   sync.Mutex
	keys map[string]*key
}

type key struct {
	versions []cipher.AEAD // versions[0] is version 1
	created  []time.Time
	minDecr  int
}

// Listen starts a fake Vault on addr ("127.0.0.1:0" for any port) that
// accepts token (DefaultToken when empty).
func Listen(addr, token string) (*Server, error) {
	if token == "" {
		token = DefaultToken
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, err
	}
	s := &Server{token: token, ln: ln, keys: map[string]*key{}}
	s.srv = &http.Server{Handler: s, ReadHeaderTimeout: 10 * time.Second}
	go s.srv.Serve(ln)
	return s, nil
}

// URL is the base address (what VAULT_ADDR or credentials.vault_address
// is set to).
func (s *Server) URL() string { return "http://" + s.ln.Addr().String() }

// Token is the token the server accepts.
func (s *Server) Token() string { return s.token }

// Close stops the server.
func (s *Server) Close() error { return s.srv.Close() }

// SetDown makes the server drop every connection without an answer (true)
// or answer again (false).
func (s *Server) SetDown(down bool) { s.down.Store(down) }

// Calls is how many requests of operation op ("encrypt", "decrypt",
// "rewrap", "rotate", ...) were answered 200.
func (s *Server) Calls(op string) int64 {
	if v, ok := s.calls.Load(op); ok {
		return v.(*atomic.Int64).Load()
	}
	return 0
}

// LatestVersion is the named key's newest version (0: no such key).
func (s *Server) LatestVersion(name string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	if k := s.keys[name]; k != nil {
		return len(k.versions)
	}
	return 0
}

func (s *Server) count(op string) {
	v, _ := s.calls.LoadOrStore(op, new(atomic.Int64))
	v.(*atomic.Int64).Add(1)
}

func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if s.down.Load() {
		if hj, ok := w.(http.Hijacker); ok {
			if c, _, err := hj.Hijack(); err == nil {
				c.Close()
				return
			}
		}
		http.Error(w, "down", http.StatusServiceUnavailable)
		return
	}
	if r.Header.Get("X-Vault-Token") != s.token {
		vaultError(w, http.StatusForbidden, "permission denied")
		return
	}
	rest, ok := strings.CutPrefix(r.URL.Path, "/v1/transit/")
	if !ok {
		vaultError(w, http.StatusNotFound, "no handler for route \""+strings.TrimPrefix(r.URL.Path, "/v1/")+"\". route entry not found.")
		return
	}
	parts := strings.Split(rest, "/")
	write := r.Method == http.MethodPost || r.Method == http.MethodPut
	var body map[string]any
	if write && r.ContentLength != 0 {
		if err := json.NewDecoder(r.Body).Decode(&body); err != nil {
			vaultError(w, http.StatusBadRequest, "failed to parse JSON input: "+err.Error())
			return
		}
	}
	switch {
	case len(parts) == 2 && parts[0] == "encrypt" && write:
		s.encrypt(w, parts[1], body)
	case len(parts) == 2 && parts[0] == "decrypt" && write:
		s.decrypt(w, parts[1], body)
	case len(parts) == 2 && parts[0] == "rewrap" && write:
		s.rewrap(w, parts[1], body)
	case len(parts) == 2 && parts[0] == "keys" && write:
		s.mu.Lock()
		s.keyLocked(parts[1], true)
		s.mu.Unlock()
		s.count("create")
		w.WriteHeader(http.StatusNoContent)
	case len(parts) == 2 && parts[0] == "keys" && r.Method == http.MethodGet:
		s.readKey(w, parts[1])
	case len(parts) == 3 && parts[0] == "keys" && parts[2] == "rotate" && write:
		s.mu.Lock()
		k := s.keyLocked(parts[1], true)
		k.addVersion()
		s.mu.Unlock()
		s.count("rotate")
		s.readKey(w, parts[1])
	case len(parts) == 3 && parts[0] == "keys" && parts[2] == "config" && write:
		s.configKey(w, parts[1], body)
	default:
		vaultError(w, http.StatusMethodNotAllowed, "unsupported operation")
	}
}

func (k *key) addVersion() {
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		panic(err)
	}
	block, _ := aes.NewCipher(b)
	g, _ := cipher.NewGCM(block)
	k.versions = append(k.versions, g)
	k.created = append(k.created, time.Now().UTC())
}

func (s *Server) keyLocked(name string, create bool) *key {
	k := s.keys[name]
	if k == nil && create {
		k = &key{minDecr: 1}
		k.addVersion()
		s.keys[name] = k
	}
	return k
}

func (s *Server) seal(k *key, plain []byte) (string, int) {
	v := len(k.versions)
	g := k.versions[v-1]
	nonce := make([]byte, g.NonceSize())
	rand.Read(nonce)
	ct := g.Seal(nonce, nonce, plain, nil)
	return fmt.Sprintf("vault:v%d:%s", v, base64.StdEncoding.EncodeToString(ct)), v
}

func (s *Server) open(k *key, ciphertext string) ([]byte, string) {
	rest, ok := strings.CutPrefix(ciphertext, "vault:v")
	vs, b64, ok2 := strings.Cut(rest, ":")
	v, err := strconv.Atoi(vs)
	if !ok || !ok2 || err != nil {
		return nil, "invalid ciphertext: no prefix"
	}
	if v < k.minDecr {
		return nil, "ciphertext or signature version is disallowed by policy (too old)"
	}
	if v < 1 || v > len(k.versions) {
		return nil, "invalid ciphertext: key version not found"
	}
	raw, err := base64.StdEncoding.DecodeString(b64)
	g := k.versions[v-1]
	if err != nil || len(raw) < g.NonceSize() {
		return nil, "invalid ciphertext: could not decode"
	}
	plain, err := g.Open(nil, raw[:g.NonceSize()], raw[g.NonceSize():], nil)
	if err != nil {
		return nil, "cipher: message authentication failed"
	}
	return plain, ""
}

func (s *Server) encrypt(w http.ResponseWriter, name string, body map[string]any) {
	p, _ := body["plaintext"].(string)
	plain, err := base64.StdEncoding.DecodeString(p)
	if err != nil {
		vaultError(w, http.StatusBadRequest, "failed to base64-decode plaintext")
		return
	}
	s.mu.Lock()
	ct, v := s.seal(s.keyLocked(name, true), plain)
	s.mu.Unlock()
	s.count("encrypt")
	vaultData(w, map[string]any{"ciphertext": ct, "key_version": v})
}

func (s *Server) decrypt(w http.ResponseWriter, name string, body map[string]any) {
	c, _ := body["ciphertext"].(string)
	s.mu.Lock()
	k := s.keyLocked(name, false)
	var plain []byte
	msg := "encryption key not found"
	if k != nil {
		plain, msg = s.open(k, c)
	}
	s.mu.Unlock()
	if msg != "" {
		vaultError(w, http.StatusBadRequest, msg)
		return
	}
	s.count("decrypt")
	vaultData(w, map[string]any{"plaintext": base64.StdEncoding.EncodeToString(plain)})
}

func (s *Server) rewrap(w http.ResponseWriter, name string, body map[string]any) {
	c, _ := body["ciphertext"].(string)
	s.mu.Lock()
	k := s.keyLocked(name, false)
	var plain []byte
	msg := "encryption key not found"
	if k != nil {
		plain, msg = s.open(k, c)
	}
	var ct string
	var v int
	if msg == "" {
		ct, v = s.seal(k, plain)
	}
	s.mu.Unlock()
	if msg != "" {
		vaultError(w, http.StatusBadRequest, msg)
		return
	}
	s.count("rewrap")
	vaultData(w, map[string]any{"ciphertext": ct, "key_version": v})
}

func (s *Server) readKey(w http.ResponseWriter, name string) {
	s.mu.Lock()
	k := s.keyLocked(name, false)
	if k == nil {
		s.mu.Unlock()
		vaultError(w, http.StatusNotFound, "")
		return
	}
	versions := map[string]any{}
	for i, t := range k.created {
		versions[strconv.Itoa(i+1)] = t.Unix()
	}
	data := map[string]any{"name": name, "type": "aes256-gcm96", "latest_version": len(k.versions),
		"min_decryption_version": k.minDecr, "min_encryption_version": 0, "keys": versions,
		"deletion_allowed": false, "exportable": false, "supports_encryption": true, "supports_decryption": true}
	s.mu.Unlock()
	vaultData(w, data)
}

func (s *Server) configKey(w http.ResponseWriter, name string, body map[string]any) {
	s.mu.Lock()
	k := s.keyLocked(name, false)
	if k == nil {
		s.mu.Unlock()
		vaultError(w, http.StatusBadRequest, "no existing key named "+name+" could be found")
		return
	}
	if v, ok := body["min_decryption_version"]; ok {
		n, err := strconv.Atoi(fmt.Sprint(v))
		if err != nil || n < 1 || n > len(k.versions) {
			s.mu.Unlock()
			vaultError(w, http.StatusBadRequest, "min decryption version must be between 1 and the latest version")
			return
		}
		k.minDecr = n
	}
	s.mu.Unlock()
	s.count("config")
	s.readKey(w, name)
}

func vaultData(w http.ResponseWriter, data map[string]any) {
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(map[string]any{"request_id": "fake", "lease_id": "", "renewable": false, "lease_duration": 0, "data": data, "wrap_info": nil, "warnings": nil, "auth": nil})
}

func vaultError(w http.ResponseWriter, status int, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	errs := []string{}
	if msg != "" {
		errs = append(errs, msg)
	}
	json.NewEncoder(w).Encode(map[string]any{"errors": errs})
}
