package fakellm

import (
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"io"
	"math"
	"net/http"
	"strings"
	"time"
	"unicode"
)

// DefaultEmbeddingDimensions is the length of the fake's vectors when the
// request asks for none.
const DefaultEmbeddingDimensions = 256

// maxEmbeddingDimensions bounds the dimensions a request may ask for.
const maxEmbeddingDimensions = 4096

// EmbedText is the fake's embedding of text: deterministic, and lexically
// similar texts get similar vectors, so retrieval over it is testable. Every
// word (letters and digits, lower-cased) adds 1 and every pair of adjacent
// words 0.5 at a position picked by the word's FNV-1a hash, with a sign from
// another bit of it (feature hashing); the sum is L2-normalised. Texts
// sharing most words have a cosine near 1, texts sharing none near 0. A text
// without a word gives the zero vector.
func EmbedText(text string, dim int) []float32 {
	if dim <= 0 {
		dim = DefaultEmbeddingDimensions
	}
	v := make([]float64, dim)
	add := func(feature string, w float64) {
		h := fnv.New64a()
		_, _ = io.WriteString(h, feature)
		x := h.Sum64()
		i := int(x % uint64(dim))
		if x>>63 == 1 {
			w = -w
		}
		v[i] += w
	}
	words := strings.FieldsFunc(strings.ToLower(text), func(r rune) bool { return !unicode.IsLetter(r) && !unicode.IsDigit(r) })
	for i, w := range words {
		add(w, 1)
		if i > 0 {
			add(words[i-1]+" "+w, 0.5)
		}
	}
	var norm float64
	for _, x := range v {
		norm += x * x
	}
	out := make([]float32, dim)
	if norm == 0 {
		return out
	}
	norm = math.Sqrt(norm)
	for i, x := range v {
		out[i] = float32(x / norm)
	}
	return out
}

// embedFormat is one embeddings API the fake speaks.
type embedFormat struct {
	format string // openai | ollama
	errs   wireFormat
}

// embedRequest is an embeddings request in format-neutral terms.
type embedRequest struct {
	model  string
	inputs []string
	dim    int
}

// inputsOf reads "input": a string or an array of strings.
func inputsOf(raw json.RawMessage) ([]string, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return nil, errors.New("'input' is a required property")
	}
	var one string
	if json.Unmarshal(raw, &one) == nil {
		return []string{one}, nil
	}
	var many []string
	if err := json.Unmarshal(raw, &many); err != nil {
		return nil, fmt.Errorf("'input' must be a string or an array of strings: %v", err)
	}
	if len(many) == 0 {
		return nil, errors.New("'input' must not be empty")
	}
	return many, nil
}

func (f embedFormat) parse(body []byte) (*embedRequest, error) {
	var req struct {
		Model      string          `json:"model"`
		Input      json.RawMessage `json:"input"`
		Dimensions int             `json:"dimensions"`
	}
	if err := json.Unmarshal(body, &req); err != nil {
		return nil, fmt.Errorf("could not parse the JSON body of the request: %v", err)
	}
	if req.Model == "" {
		return nil, errors.New("you must provide a model parameter")
	}
	inputs, err := inputsOf(req.Input)
	if err != nil {
		return nil, err
	}
	for i, in := range inputs {
		if f.format == "openai" && in == "" {
			return nil, fmt.Errorf("'$.input[%d]' is invalid: an empty string cannot be embedded", i)
		}
	}
	if req.Dimensions < 0 || req.Dimensions > maxEmbeddingDimensions {
		return nil, fmt.Errorf("dimensions %d is out of range (1..%d)", req.Dimensions, maxEmbeddingDimensions)
	}
	dim := req.Dimensions
	if dim == 0 {
		dim = DefaultEmbeddingDimensions
	}
	return &embedRequest{model: req.Model, inputs: inputs, dim: dim}, nil
}

// serveEmbeddings answers POST /v1/embeddings (OpenAI) and POST /api/embed
// (Ollama). Rules apply as to chat calls, matched against the inputs joined
// by newlines: status, message, body, retry_after, headers, delay, cut (the
// connection is closed without an answer), usage (input_tokens) and
// omit_usage. Nothing is streamed.
func (s *Server) serveEmbeddings(f embedFormat) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(io.LimitReader(r.Body, maxBody+1))
		if err != nil {
			return
		}
		if len(body) > maxBody {
			writeJSON(w, http.StatusRequestEntityTooLarge, f.errs.errorBody(413, "request too large"))
			return
		}
		req, perr := f.parse(body)
		rec := &CallRecord{Time: time.Now().UTC(), Path: r.URL.Path, Format: f.format, Rule: -1}
		rec.Auth, rec.KeyHint = authOf(r)
		var conv *conversation
		if req != nil {
			joined := strings.Join(req.inputs, "\n")
			conv = &conversation{format: f.format, model: req.model, lastText: joined, lastUser: req.inputs[0], textLen: len(joined)}
			rec.Model, rec.LastUserMessage, rec.Inputs = req.model, req.inputs[0], len(req.inputs)
		}
		if len(body) <= maxRecordedBody && json.Valid(body) {
			rec.Body = body
		}
		rule, seq, logger := s.admit(rec, conv)
		if h := f.errs.requestIDHeader(); h != "" {
			w.Header().Set(h, rec.RequestID)
		}
		if perr != nil {
			s.finish(rec, http.StatusBadRequest, false)
			writeJSON(w, http.StatusBadRequest, f.errs.errorBody(400, perr.Error()))
			return
		}
		logger.Debug("fake llm embeddings", "seq", seq, "format", f.format, "model", req.model, "inputs", len(req.inputs), "rule", rec.Rule)
		if d := time.Duration(rule.Delay); d > 0 {
			t := time.NewTimer(d)
			select {
			case <-t.C:
			case <-r.Context().Done():
				t.Stop()
				s.finish(rec, 0, false)
				return
			}
		}
		for k, v := range rule.Headers {
			w.Header().Set(k, v)
		}
		if rule.Status >= 400 {
			if rule.RetryAfter != "" {
				w.Header().Set("Retry-After", rule.RetryAfter)
			}
			s.finish(rec, rule.Status, false)
			if rule.Body != "" {
				w.Header().Set("Content-Type", "application/json")
				w.WriteHeader(rule.Status)
				_, _ = io.WriteString(w, rule.Body)
				return
			}
			msg := rule.Message
			if msg == "" {
				msg = fmt.Sprintf("fake %s error %d", f.format, rule.Status)
			}
			writeJSON(w, rule.Status, f.errs.errorBody(rule.Status, msg))
			return
		}
		if rule.Cut || rule.CutAfterChunks > 0 {
			s.finish(rec, 0, true)
			panic(http.ErrAbortHandler)
		}
		var tokens int64
		vecs := make([][]float32, len(req.inputs))
		for i, in := range req.inputs {
			vecs[i] = EmbedText(in, req.dim)
			tokens += max(1, int64(len(in)/4))
		}
		if rule.Usage != nil {
			tokens = rule.Usage.InputTokens
		}
		s.finish(rec, http.StatusOK, false)
		switch f.format {
		case "ollama":
			out := map[string]any{"model": req.model, "embeddings": vecs, "total_duration": 5_000_000, "load_duration": 1_000_000}
			if !rule.OmitUsage {
				out["prompt_eval_count"] = tokens
			}
			writeJSON(w, http.StatusOK, out)
		default:
			data := make([]any, len(vecs))
			for i, v := range vecs {
				data[i] = map[string]any{"object": "embedding", "index": i, "embedding": v}
			}
			out := map[string]any{"object": "list", "data": data, "model": req.model}
			if !rule.OmitUsage {
				out["usage"] = map[string]any{"prompt_tokens": tokens, "total_tokens": tokens}
			}
			writeJSON(w, http.StatusOK, out)
		}
	}
}
