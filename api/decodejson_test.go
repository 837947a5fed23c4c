package api

import (
	"bytes"
	"encoding/json"
	"reflect"
	"testing"
	"time"

	gojson "github.com/goccy/go-json"
	"github.com/gofiber/fiber/v2"

	"github.com/agentryhq/agentry/internal/chat"
	"github.com/agentryhq/agentry/internal/costs"
	"github.com/agentryhq/agentry/internal/mcp"
	"github.com/agentryhq/agentry/internal/pkginstall"
	"github.com/agentryhq/agentry/internal/skills"
)

// decodeJSON decodes with goccy/go-json and leaves a refused body to
// encoding/json: for every body type of the API, the two must accept the
// same bodies and decode them to the same values.
func TestDecodeJSONAgreesWithEncodingJSON(t *testing.T) {
	bodies := []string{
		`{"agent_id":"a","text":"hi","user_id":"u","overrides":{"model":"m","temperature":0.5,"max_tokens":10}}`,
		`{"AGENT_ID":"upper-case keys match","Text":"x"}`,
		`{"agent_id":"a","agent_id":"duplicate: the last wins"}`,
		`{"text":"unicode \u00e9 \ud83d\ude00 \u2028","unknown":{"nested":[1,2,{"x":null}]}}`,
		`{"agent_id":null,"overrides":null,"confirm_cost":null}`,
		`{"confirm_cost":"yes"}`,
		`{"confirm_cost":1}`,
		`{"agent_id":5}`,
		`{"overrides":{"max_tokens":1.5}}`,
		`{"overrides":{"max_tokens":1e40}}`,
		`{"overrides":[]}`,
		`{"rating":"up","comment":"c","response_id":"r"}`,
		`{"transport":"http","url":"http://x","headers":{"A":"b"},"args":["1"],"env":{"K":"V"}}`,
		`{"decision":"approve","reason":" spaced "}`,
		`{"model":"m","messages":[{"role":"user","content":"hi"}],"max_tokens":5}`,
		`{"source":"x","ref":"y","version":"1.2.3","force":true}`,
		`{"a": {"b" : [ 1 , 2 ] } , "c" : "d"}`,
		`{"id":"c1"} trailing`,
		`{"id":"c1",`,
		`{"id":"cut`,
		`[1,2]`,
		`"a string"`,
		`123`,
		`null`,
		`{}`,
		`{"x":1,}`,
		`{'single':'quotes'}`,
		`{"big":123456789012345678901234567890}`,
		`{"esc":"\x"}`,
	}
	targets := []func() any{
		func() any { return &chatBody{} },
		func() any { return &chat.FeedbackRequest{} },
		func() any { return &map[string]json.RawMessage{} },
		func() any { return &mcp.Spec{} },
		func() any { return &decisionRequest{} },
		func() any { return &commentBody{} },
		func() any { return &costs.EstimateRequest{} },
		func() any { return &pkginstall.Request{} },
		func() any { return &skills.InstallRequest{} },
		func() any { return &configPatch{} },
		func() any { return &channelPatch{} },
		func() any { return &sendBody{} },
		func() any { return &triggerBody{} },
		func() any { return &reconcileRunRequest{} },
	}
	for _, body := range bodies {
		for _, target := range targets {
			got, want := target(), target()
			err := gojson.Unmarshal([]byte(body), got)
			wantErr := json.Unmarshal([]byte(body), want)
			if err == nil && wantErr != nil {
				t.Errorf("%T from %q: goccy accepts what encoding/json refuses (%v)", got, body, wantErr)
				continue
			}
			if err == nil && !reflect.DeepEqual(got, want) {
				t.Errorf("%T from %q:\n goccy %+v\n encoding/json %+v", got, body, got, want)
			}
		}
	}
}

// The API writes its responses with goccy/go-json (fiber's JSONEncoder):
// the bytes must be the ones encoding/json writes.
func TestResponseEncoderAgreesWithEncodingJSON(t *testing.T) {
	type inner struct {
		When time.Time `json:"when"`
		Note *string   `json:"note,omitempty"`
	}
	type outer struct {
		inner
		ID     int64           `json:"id"`
		Raw    json.RawMessage `json:"raw,omitempty"`
		Bytes  []byte          `json:"bytes"`
		Skip   string          `json:"-"`
		Plain  string
		Floats []float64      `json:"floats"`
		Any    any            `json:"any"`
		Keys   map[int]string `json:"keys"`
	}
	note := "<b>&</b>"
	for _, v := range []any{
		fiber.Map{"reply": "Hello! \u2028 é 😀 <x>", "session_id": "s", "n": 3, "ok": true, "none": nil},
		&chat.Reply{Reply: "hi", SessionID: "s", RunID: "r", ResponseID: "p", StopReason: "stop"},
		outer{inner: inner{When: time.Date(2026, 11, 27, 13, 0, 0, 123456789, time.UTC), Note: &note}, ID: 1 << 60,
			Raw: json.RawMessage(`{ "a" : [1, 2] }`), Bytes: []byte{0, 1, 254}, Skip: "x", Plain: "p",
			Floats: []float64{0.1, 1e21, 1e-7, 123456789.125, -0}, Any: map[string]any{"z": 1, "a": []any{"x", 2.5}}, Keys: map[int]string{10: "b", 2: "a"}},
		[]any{nil, "tab\t", uint64(1<<64 - 1)},
		map[string]any{},
	} {
		want, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		got, err := gojson.Marshal(v)
		if err != nil || !bytes.Equal(got, want) {
			t.Errorf("%T:\n goccy %s (%v)\n encoding/json %s", v, got, err, want)
		}
	}
}
