// Package fakekms is a fake AWS KMS on 127.0.0.1 for tests: real HTTP
// speaking KMS's JSON protocol (POST /, Content-Type
// application/x-amz-json-1.1, X-Amz-Target: TrentService.<Operation>), so
// the real AWS SDK client (through gocloud.dev/secrets/awskms) can be
// pointed at it with the keeper URL's endpoint parameter:
//
//	awskms://alias/agentry?region=us-east-1&endpoint=<URL>
//
// Operations: Encrypt {KeyId, Plaintext} -> {CiphertextBlob, KeyId},
// Decrypt {CiphertextBlob} -> {Plaintext, KeyId} (the key is named inside
// the blob, as real KMS does for symmetric keys), ReEncrypt. Keys are
// created on first use under any KeyId. A request without an AWS SigV4
// Authorization header, or signed with another access key id, is answered
// 400 UnrecognizedClientException as KMS does. SetDown drops connections.
package fakekms

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"encoding/json"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// Server is a running fake KMS.
type Server struct {
	accessKey string
	ln        net.Listener
	srv       *http.Server
	down      atomic.Bool
	calls     sync.Map

	mu   sync.Mutex
	keys map[string]cipher.AEAD
}

// Listen starts a fake KMS on addr accepting requests signed with
// accessKeyID (any secret: signatures are not verified).
func Listen(addr, accessKeyID string) (*Server, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, err
	}
	s := &Server{accessKey: accessKeyID, ln: ln, keys: map[string]cipher.AEAD{}}
	s.srv = &http.Server{Handler: s, ReadHeaderTimeout: 10 * time.Second}
	go s.srv.Serve(ln)
	return s, nil
}

// URL is the endpoint.
func (s *Server) URL() string { return "http://" + s.ln.Addr().String() }

// Close stops the server.
func (s *Server) Close() error { return s.srv.Close() }

// SetDown makes the server drop every connection (true) or answer again.
func (s *Server) SetDown(down bool) { s.down.Store(down) }

// Calls is how many op requests ("Encrypt", "Decrypt") were answered 200.
func (s *Server) Calls(op string) int64 {
	if v, ok := s.calls.Load(op); ok {
		return v.(*atomic.Int64).Load()
	}
	return 0
}

func (s *Server) key(id string) cipher.AEAD {
	s.mu.Lock()
	defer s.mu.Unlock()
	if k := s.keys[id]; k != nil {
		return k
	}
	b := make([]byte, 32)
	rand.Read(b)
	block, _ := aes.NewCipher(b)
	g, _ := cipher.NewGCM(block)
	s.keys[id] = g
	return g
}

func fail(w http.ResponseWriter, status int, typ, msg string) {
	w.Header().Set("Content-Type", "application/x-amz-json-1.1")
	w.Header().Set("X-Amzn-ErrorType", typ)
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(map[string]string{"__type": typ, "message": msg})
}

func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if s.down.Load() {
		if hj, ok := w.(http.Hijacker); ok {
			if c, _, err := hj.Hijack(); err == nil {
				c.Close()
				return
			}
		}
	}
	auth := r.Header.Get("Authorization")
	if !strings.HasPrefix(auth, "AWS4-HMAC-SHA256 Credential="+s.accessKey+"/") {
		fail(w, http.StatusBadRequest, "UnrecognizedClientException", "The security token included in the request is invalid.")
		return
	}
	op, ok := strings.CutPrefix(r.Header.Get("X-Amz-Target"), "TrentService.")
	if r.Method != http.MethodPost || !ok {
		fail(w, http.StatusBadRequest, "UnknownOperationException", "")
		return
	}
	var in struct {
		KeyID            string `json:"KeyId"`
		DestinationKeyID string `json:"DestinationKeyId"`
		Plaintext        []byte
		CiphertextBlob   []byte
	}
	if err := json.NewDecoder(r.Body).Decode(&in); err != nil {
		fail(w, http.StatusBadRequest, "SerializationException", err.Error())
		return
	}
	out := map[string]any{}
	switch op {
	case "Encrypt":
		if in.KeyID == "" {
			fail(w, http.StatusBadRequest, "ValidationException", "KeyId is required")
			return
		}
		out["CiphertextBlob"], out["KeyId"] = s.seal(in.KeyID, in.Plaintext), in.KeyID
	case "Decrypt", "ReEncrypt":
		id, plain, ok := s.open(in.CiphertextBlob)
		if !ok {
			fail(w, http.StatusBadRequest, "InvalidCiphertextException", "")
			return
		}
		if op == "Decrypt" {
			out["Plaintext"], out["KeyId"] = plain, id
		} else {
			out["CiphertextBlob"], out["KeyId"], out["SourceKeyId"] = s.seal(in.DestinationKeyID, plain), in.DestinationKeyID, id
		}
	default:
		fail(w, http.StatusBadRequest, "UnknownOperationException", op)
		return
	}
	out["EncryptionAlgorithm"] = "SYMMETRIC_DEFAULT"
	v, _ := s.calls.LoadOrStore(op, new(atomic.Int64))
	v.(*atomic.Int64).Add(1)
	w.Header().Set("Content-Type", "application/x-amz-json-1.1")
	json.NewEncoder(w).Encode(out)
}

// A blob is len(id) || id || nonce || sealed.
func (s *Server) seal(id string, plain []byte) []byte {
	g := s.key(id)
	nonce := make([]byte, g.NonceSize())
	rand.Read(nonce)
	blob := append([]byte{byte(len(id))}, id...)
	blob = append(blob, nonce...)
	return g.Seal(blob, nonce, plain, []byte(id))
}

func (s *Server) open(blob []byte) (string, []byte, bool) {
	if len(blob) < 1 || len(blob) < 1+int(blob[0]) {
		return "", nil, false
	}
	id := string(blob[1 : 1+int(blob[0])])
	rest := blob[1+int(blob[0]):]
	s.mu.Lock()
	g := s.keys[id]
	s.mu.Unlock()
	if g == nil || len(rest) < g.NonceSize() {
		return "", nil, false
	}
	plain, err := g.Open(nil, rest[:g.NonceSize()], rest[g.NonceSize():], []byte(id))
	return id, plain, err == nil
}
