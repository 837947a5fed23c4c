// Package agentpkg is the agent package format (.agentry-agent.json): one
// JSON document that carries an agent definition with its secrets removed,
// the agent's bundled files (tools/, evals/, prompts/, samples/), the
// checklist of what the agent needs on the target gateway, a checksum over
// the canonical bytes and an optional Ed25519 signature over the same bytes.
//
// The format is described for other implementations in docs/packages.md;
// testdata/ holds the published example and the test vectors.
package agentpkg

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/agentryhq/agentry/internal/fault"
)

// Format identifiers of a package document.
const (
	// FormatName is the value of the "format" field.
	FormatName = "agentry-agent-package"
	// FormatVersion is the only format_version this build reads and writes.
	FormatVersion = 1
	// Extension is the file name suffix of a package.
	Extension = ".agentry-agent.json"
	// MaxPackageBytes bounds a package document (the bundled files are
	// base64 in it).
	MaxPackageBytes = 16 << 20
	// checksumPrefix names the hash of the checksum field.
	checksumPrefix = "sha256:"
)

// Package is a decoded package document.
type Package struct {
	Format        string `json:"format"`
	FormatVersion int    `json:"format_version"`
	// Agent is the redacted definition as a JSON object (the YAML file's
	// keys); enabled is never exported.
	Agent        map[string]any `json:"agent"`
	Files        []File         `json:"files"`
	Requirements Requirements   `json:"requirements"`
	// Redacted lists the definition keys whose values were removed.
	Redacted  []string   `json:"redacted"`
	CreatedBy string     `json:"created_by,omitempty"`
	Checksum  string     `json:"checksum"`
	Signature *Signature `json:"signature,omitempty"`
}

// File is one bundled file. Path is relative, slash-separated and lies
// under one of BundleDirs.
type File struct {
	Path string `json:"path"`
	Size int64  `json:"size"`
	// SHA256 is the lowercase hex SHA-256 of the content.
	SHA256 string `json:"sha256"`
	// Content is the file's bytes, standard base64.
	Content string `json:"content"`
}

// Requirements is the setup checklist: what the agent refers to that the
// target gateway must provide. Every list is sorted and never null.
type Requirements struct {
	Providers      []string `json:"providers"`
	Channels       []string `json:"channels"`
	PeerAgents     []string `json:"peer_agents"`
	Skills         []string `json:"skills"`
	MCPServers     []string `json:"mcp_servers"`
	Files          []string `json:"files"`
	KnowledgeBases []string `json:"knowledge_bases"`
	Secrets        []string `json:"secrets"`
}

// Signature is the optional Ed25519 signature over the canonical bytes.
type Signature struct {
	Algorithm string `json:"algorithm"`
	// KeyID is the first 16 hex digits of SHA-256(public key).
	KeyID string `json:"key_id"`
	// PublicKey is the signer's 32-byte public key, hex. It lets anyone
	// check integrity; trust comes from a configured key (see Verify).
	PublicKey string `json:"public_key"`
	// Value is the 64-byte signature, standard base64.
	Value string `json:"value"`
}

// AgentID is the id of the packaged agent ("" if missing).
func (p *Package) AgentID() string {
	id, _ := p.Agent["id"].(string)
	return id
}

// Canonical returns the bytes the checksum and the signature cover: the
// document without its "checksum" and "signature" members, as JSON with
// object keys sorted by their UTF-8 bytes, no insignificant whitespace,
// numbers as written, and strings escaped minimally (", \ and control
// characters; no HTML escaping).
func Canonical(doc []byte) ([]byte, error) {
	obj, err := decodeObject(doc)
	if err != nil {
		return nil, err
	}
	delete(obj, "checksum")
	delete(obj, "signature")
	return marshalCanonical(obj)
}

// Checksum is "sha256:" + the lowercase hex SHA-256 of canonical bytes.
func Checksum(canonical []byte) string {
	sum := sha256.Sum256(canonical)
	return checksumPrefix + hex.EncodeToString(sum[:])
}

func decodeObject(doc []byte) (map[string]any, error) {
	dec := json.NewDecoder(bytes.NewReader(doc))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, invalidf(KindMalformed, "not a JSON document: %v", err)
	}
	if dec.More() {
		return nil, invalidf(KindMalformed, "trailing data after the JSON document")
	}
	obj, ok := v.(map[string]any)
	if !ok {
		return nil, invalidf(KindMalformed, "the document is not a JSON object")
	}
	return obj, nil
}

// marshalCanonical encodes v with sorted keys (encoding/json sorts map
// keys) and without HTML escaping.
func marshalCanonical(v any) ([]byte, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, fmt.Errorf("canonical form: %w", err)
	}
	return bytes.TrimSuffix(b.Bytes(), []byte("\n")), nil
}

// toGeneric turns a struct into the generic JSON tree the canonical form
// is computed from, so writing and verifying use the same code.
func toGeneric(v any) (map[string]any, error) {
	data, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	return decodeObject(data)
}

// Kinds of verification failure; the CLI and the API name them.
const (
	KindMalformed     = "malformed"
	KindFormatVersion = "unknown_format_version"
	KindChecksum      = "checksum_mismatch"
	KindUnsafePath    = "unsafe_path"
	KindSignature     = "bad_signature"
	KindUntrustedKey  = "untrusted_key"
	KindUnsigned      = "unsigned"
	KindDefinition    = "invalid_definition"
)

// Error is a package that failed verification (or could not be built).
// Kind is one of the Kind* constants.
type Error struct {
	Kind string
	Msg  string
}

func (e *Error) Error() string { return e.Msg }

// Fault implements fault.Fault: 400 whose code names the cause
// (checksum_mismatch, unsafe_path, ...).
func (e *Error) Fault() fault.Detail {
	return fault.Detail{Kind: fault.KindInvalid, Code: e.Kind, Message: e.Msg}
}

func invalidf(kind, format string, args ...any) *Error {
	return &Error{Kind: kind, Msg: fmt.Sprintf(format, args...)}
}

// KindOf returns the kind of a verification error, or "".
func KindOf(err error) string {
	var e *Error
	if errors.As(err, &e) {
		return e.Kind
	}
	return ""
}
