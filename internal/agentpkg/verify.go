package agentpkg

import (
	"bytes"
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"path"
	"strconv"
	"strings"

	"github.com/agentryhq/agentry/internal/agentdef"
	"github.com/agentryhq/agentry/internal/textcut"
)

// VerifyOptions say which signers are trusted.
type VerifyOptions struct {
	// TrustedKeys, when not empty, are the only keys a signature may come
	// from, and a signature becomes mandatory.
	TrustedKeys []ed25519.PublicKey
	// RequireSignature refuses unsigned packages even without TrustedKeys.
	RequireSignature bool
}

// Verify checks a package document, in this order: size, JSON, format and
// format version, checksum over the canonical bytes, signature, bundled
// file paths and hashes, and the agent definition. The first failure is
// returned as an *Error naming its cause.
func Verify(doc []byte, opts VerifyOptions) (*Package, error) {
	if len(doc) > MaxPackageBytes {
		return nil, invalidf(KindMalformed, "package is %d bytes, over the %d-byte limit", len(doc), MaxPackageBytes)
	}
	obj, err := decodeObject(doc)
	if err != nil {
		return nil, err
	}
	if f, _ := obj["format"].(string); f != FormatName {
		return nil, invalidf(KindMalformed, "not an agent package: format is %s, want %q", describeValue(obj, "format"), FormatName)
	}
	if n, ok := obj["format_version"].(json.Number); !ok || n.String() != fmt.Sprint(FormatVersion) {
		return nil, invalidf(KindFormatVersion, "unknown format_version %s: this build reads version %d packages; upgrade agentry to read it", describeValue(obj, "format_version"), FormatVersion)
	}
	var p Package
	dec := json.NewDecoder(bytes.NewReader(doc))
	if err := dec.Decode(&p); err != nil {
		return nil, invalidf(KindMalformed, "package fields: %v", err)
	}
	delete(obj, "checksum")
	delete(obj, "signature")
	canon, err := marshalCanonical(obj)
	if err != nil {
		return nil, err
	}
	if want := Checksum(canon); p.Checksum != want {
		return nil, invalidf(KindChecksum, "checksum mismatch: the package says %q but its content hashes to %q; it was changed after it was written", p.Checksum, want)
	}
	if err := verifySignature(p.Signature, canon, opts); err != nil {
		return nil, err
	}
	if err := verifyFiles(p.Files); err != nil {
		return nil, err
	}
	if _, err := p.Definition(); err != nil {
		return nil, err
	}
	return &p, nil
}

func verifySignature(s *Signature, canon []byte, opts VerifyOptions) error {
	if s == nil {
		if len(opts.TrustedKeys) > 0 || opts.RequireSignature {
			return invalidf(KindUnsigned, "package is unsigned, and a signature is required (a signing key is configured)")
		}
		return nil
	}
	if s.Algorithm != "ed25519" {
		return invalidf(KindSignature, "signature algorithm %q is not supported (ed25519 only)", s.Algorithm)
	}
	pub, err := ParsePublicKey(s.PublicKey)
	if err != nil {
		return invalidf(KindSignature, "signature public_key: %v", err)
	}
	if KeyID(pub) != s.KeyID {
		return invalidf(KindSignature, "signature key_id %q does not belong to its public key (%s)", s.KeyID, KeyID(pub))
	}
	sig, err := base64.StdEncoding.DecodeString(s.Value)
	if err != nil || len(sig) != ed25519.SignatureSize {
		return invalidf(KindSignature, "signature value is not a base64 Ed25519 signature")
	}
	if !ed25519.Verify(pub, canon, sig) {
		return invalidf(KindSignature, "signature by key %s does not verify: the package was changed after it was signed", s.KeyID)
	}
	if len(opts.TrustedKeys) == 0 {
		return nil
	}
	ids := make([]string, 0, len(opts.TrustedKeys))
	for _, k := range opts.TrustedKeys {
		if k.Equal(pub) {
			return nil
		}
		ids = append(ids, KeyID(k))
	}
	return invalidf(KindUntrustedKey, "package is signed by key %s, which is not the trusted key (%s)", s.KeyID, strings.Join(ids, ", "))
}

// checkPath accepts a relative slash path below one of BundleDirs without
// "..", empty or dot segments, backslashes, NUL or a leading slash.
func checkPath(p string) error {
	if p == "" || strings.HasPrefix(p, "/") || strings.ContainsAny(p, "\\\x00") || path.Clean(p) != p {
		return fmt.Errorf("path %q is not a clean relative path", p)
	}
	for _, seg := range strings.Split(p, "/") {
		if seg == ".." || seg == "." || seg == "" {
			return fmt.Errorf("path %q escapes the bundle", p)
		}
	}
	top, rest, _ := strings.Cut(p, "/")
	if rest == "" || !containsString(BundleDirs, top) {
		return fmt.Errorf("path %q is outside the bundle folders (%s)", p, strings.Join(BundleDirs, "/, ")+"/")
	}
	return nil
}

func containsString(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

func verifyFiles(files []File) error {
	seen := map[string]bool{}
	total := int64(0)
	if len(files) > MaxFiles {
		return invalidf(KindMalformed, "%d bundled files, over the limit of %d", len(files), MaxFiles)
	}
	for _, f := range files {
		if err := checkPath(f.Path); err != nil {
			return invalidf(KindUnsafePath, "bundled file refused: %v", err)
		}
		key := strings.ToLower(f.Path)
		if seen[key] {
			return invalidf(KindUnsafePath, "bundled file %q appears twice (names are compared case-insensitively)", f.Path)
		}
		seen[key] = true
		data, err := base64.StdEncoding.DecodeString(f.Content)
		if err != nil {
			return invalidf(KindMalformed, "bundled file %q: content is not base64", f.Path)
		}
		sum := sha256.Sum256(data)
		if int64(len(data)) != f.Size || hex.EncodeToString(sum[:]) != f.SHA256 {
			return invalidf(KindChecksum, "bundled file %q: content does not match its size and sha256", f.Path)
		}
		if f.Size > MaxFileBytes {
			return invalidf(KindMalformed, "bundled file %q: %d bytes is over the %d-byte limit", f.Path, f.Size, MaxFileBytes)
		}
		total += f.Size
	}
	if total > MaxTotalBytes {
		return invalidf(KindMalformed, "bundled files total %d bytes, over the %d-byte limit", total, MaxTotalBytes)
	}
	return nil
}

// Definition returns the packaged definition as YAML text, validated by
// the gateway's own parser.
func (p *Package) Definition() ([]byte, error) {
	if len(p.Agent) == 0 {
		return nil, invalidf(KindDefinition, "package has no agent definition")
	}
	raw, err := json.Marshal(p.Agent)
	if err != nil {
		return nil, invalidf(KindDefinition, "agent definition: %v", err)
	}
	text, err := agentdef.DefinitionFromJSON(raw)
	if err != nil {
		return nil, invalidf(KindDefinition, "agent definition: %v", err)
	}
	if _, err := agentdef.Parse(text, "package agent"); err != nil {
		return nil, invalidf(KindDefinition, "agent definition is invalid: %v", err)
	}
	return text, nil
}

// FileContents decodes the bundled files (call after Verify).
func (p *Package) FileContents() (map[string][]byte, error) {
	out := make(map[string][]byte, len(p.Files))
	for _, f := range p.Files {
		data, err := base64.StdEncoding.DecodeString(f.Content)
		if err != nil {
			return nil, invalidf(KindMalformed, "bundled file %q: content is not base64", f.Path)
		}
		out[f.Path] = data
	}
	return out, nil
}

// describeValue words a document field for an error: quoted text, a number
// as written, or what the field is when it is neither ("missing", "null",
// "an object"), never Go's %!q(<nil>).
func describeValue(obj map[string]any, key string) string {
	v, ok := obj[key]
	if !ok {
		return "missing"
	}
	switch v := v.(type) {
	case nil:
		return "null"
	case string:
		return strconv.Quote(textcut.Prefix(v, 64))
	case json.Number:
		return textcut.Prefix(v.String(), 64)
	case bool:
		return strconv.FormatBool(v)
	case map[string]any:
		return "an object"
	case []any:
		return "an array"
	}
	return fmt.Sprintf("a %T", v)
}
