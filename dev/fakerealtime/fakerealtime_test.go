package fakerealtime_test

import (
	"context"
	"encoding/base64"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/coder/websocket/wsjson"
	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/realtime"

	"github.com/agentryhq/agentry/dev/fakerealtime"
)

// The fake speaks the protocol to the real clients: openai-go mints the
// ephemeral key, a WebSocket client sends audio frames and gets the
// transcript, audio and usage; a control connection with the provider key
// sees the same events and a hangup ends the session.
func TestFakeRealtimeSession(t *testing.T) {
	f := fakerealtime.New()
	if err := f.Start("127.0.0.1:0"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(f.Close)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()

	client := openai.NewClient(option.WithBaseURL(f.BaseURL()+"/"), option.WithAPIKey(f.APIKey), option.WithMaxRetries(0))
	secret, err := client.Realtime.ClientSecrets.New(ctx, realtime.ClientSecretNewParams{
		ExpiresAfter: realtime.ClientSecretNewParamsExpiresAfter{Seconds: openai.Int(60)},
		Session: realtime.ClientSecretNewParamsSessionUnion{OfRealtime: &realtime.RealtimeSessionCreateRequestParam{
			Model: realtime.RealtimeSessionCreateRequestModel("gpt-realtime")}},
	})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(secret.Value, "ek_") || !strings.HasPrefix(secret.Session.ID, "sess_") {
		t.Fatalf("minted %+v", secret)
	}
	bad := openai.NewClient(option.WithBaseURL(f.BaseURL()+"/"), option.WithAPIKey("wrong"), option.WithMaxRetries(0))
	if _, err := bad.Realtime.ClientSecrets.New(ctx, realtime.ClientSecretNewParams{}); err == nil {
		t.Fatal("a wrong provider key minted a secret")
	}

	ws := "ws" + strings.TrimPrefix(f.BaseURL(), "http") + "/realtime"
	ctl, _, err := websocket.Dial(ctx, ws+"?call_id="+secret.Session.ID, &websocket.DialOptions{HTTPHeader: http.Header{"Authorization": {"Bearer " + f.APIKey}}})
	if err != nil {
		t.Fatal(err)
	}
	defer ctl.CloseNow()
	// The browser's way: the ephemeral key as a subprotocol.
	c, _, err := websocket.Dial(ctx, ws+"?model=gpt-realtime", &websocket.DialOptions{Subprotocols: []string{"realtime", "openai-insecure-api-key." + secret.Value}})
	if err != nil {
		t.Fatal(err)
	}
	defer c.CloseNow()
	for _, ev := range []map[string]any{
		{"type": "session.update", "session": map[string]any{"instructions": "be brief"}},
		{"type": "input_audio_buffer.append", "audio": base64.StdEncoding.EncodeToString(make([]byte, 48000))},
		{"type": "input_audio_buffer.commit"},
		{"type": "response.create"},
	} {
		if err := wsjson.Write(ctx, c, ev); err != nil {
			t.Fatal(err)
		}
	}
	var transcript, heard strings.Builder
	var audio int
	var usage map[string]any
	for usage == nil {
		var ev map[string]any
		if err := wsjson.Read(ctx, c, &ev); err != nil {
			t.Fatal(err)
		}
		switch ev["type"] {
		case "conversation.item.input_audio_transcription.completed":
			heard.WriteString(ev["transcript"].(string))
		case "response.output_audio_transcript.delta":
			transcript.WriteString(ev["delta"].(string))
		case "response.output_audio.delta":
			raw, _ := base64.StdEncoding.DecodeString(ev["delta"].(string))
			audio += len(raw)
		case "response.done":
			usage = ev["response"].(map[string]any)["usage"].(map[string]any)
		}
	}
	if heard.String() != f.Transcript || transcript.String() != f.Reply || audio == 0 {
		t.Fatalf("heard %q, said %q, %d audio bytes", heard.String(), transcript.String(), audio)
	}
	if usage["input_tokens"] != float64(10) || usage["output_tokens"] != float64(len(strings.Fields(f.Reply))) {
		t.Fatalf("usage %v", usage)
	}
	// The control connection saw the same response.done.
	for {
		var ev map[string]any
		if err := wsjson.Read(ctx, ctl, &ev); err != nil {
			t.Fatalf("control connection: %v", err)
		}
		if ev["type"] == "response.done" {
			break
		}
	}
	req, _ := http.NewRequestWithContext(ctx, "POST", f.BaseURL()+"/realtime/calls/"+secret.Session.ID+"/hangup", nil)
	req.Header.Set("Authorization", "Bearer "+f.APIKey)
	resp, err := http.DefaultClient.Do(req)
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("hangup: %v %v", resp, err)
	}
	resp.Body.Close()
	if _, _, err := c.Read(ctx); websocket.CloseStatus(err) != websocket.StatusNormalClosure {
		t.Fatalf("after hangup the client read %v", err)
	}
	if !f.Ended(secret.Session.ID) {
		t.Fatal("session not ended")
	}
}
