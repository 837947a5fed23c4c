package voice_test

import (
	"context"
	"encoding/base64"
	"sync"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/coder/websocket/wsjson"

	"github.com/agentryhq/agentry/dev/fakerealtime"
	"github.com/agentryhq/agentry/internal/agentdef"
	"github.com/agentryhq/agentry/internal/config"
	"github.com/agentryhq/agentry/internal/llm"
	"github.com/agentryhq/agentry/internal/voice"
)

// gate records what the voice service admits and settles; the real
// controller's part is proved in e2e/voice_test.go.
type gate struct {
	mu      sync.Mutex
	calls   []*llm.Call
	settled []*llm.Response
	clampTo int
}

type admission struct{ g *gate }

func (g *gate) Admit(_ context.Context, c *llm.Call) (llm.Admission, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.clampTo > 0 {
		c.Request.MaxTokens = g.clampTo
	}
	g.calls = append(g.calls, c)
	return admission{g}, nil
}

func (a admission) Settle(_ context.Context, resp *llm.Response, _ error, _ int) {
	a.g.mu.Lock()
	defer a.g.mu.Unlock()
	a.g.settled = append(a.g.settled, resp)
}

type agents map[string]*agentdef.Definition

func (a agents) Get(id string) (*agentdef.Definition, bool) { d, ok := a[id]; return d, ok }

func setup(t testing.TB, g *gate) (*voice.Service, *fakerealtime.Server) {
	f := fakerealtime.New()
	if err := f.Start("127.0.0.1:0"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(f.Close)
	cfg := config.VoiceConfig{Provider: "openai", Model: "gpt-realtime", BaseURL: f.BaseURL(), APIKey: f.APIKey, MaxSessionSeconds: 30}
	return &voice.Service{Config: func() config.VoiceConfig { return cfg }, Gate: g,
		Agents: agents{"talker": {ID: "talker", Voice: true}, "mute": {ID: "mute"}}}, f
}

func TestSessionsSettleFromTheirUsage(t *testing.T) {
	g := &gate{}
	svc, f := setup(t, g)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	var wg sync.WaitGroup
	for range 3 { // concurrent sessions, each its own admission
		wg.Add(1)
		go func() {
			defer wg.Done()
			s, err := svc.Mint(ctx, "talker", voice.Who{Subject: "ana"})
			if err != nil {
				t.Error(err)
				return
			}
			c, _, err := websocket.Dial(ctx, s.URL, &websocket.DialOptions{Subprotocols: []string{"realtime", "openai-insecure-api-key." + s.ClientSecret}})
			if err != nil {
				t.Error(err)
				return
			}
			wsjson.Write(ctx, c, map[string]any{"type": "input_audio_buffer.append", "audio": base64.StdEncoding.EncodeToString(make([]byte, 48000))})
			wsjson.Write(ctx, c, map[string]any{"type": "response.create"})
			for {
				var ev map[string]any
				if wsjson.Read(ctx, c, &ev) != nil || ev["type"] == "response.done" {
					break
				}
			}
			c.Close(websocket.StatusNormalClosure, "")
		}()
	}
	wg.Wait()
	// The sessions ended with their clients: each settles on its own
	// (Close would cut a monitor short).
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		g.mu.Lock()
		n := len(g.settled)
		g.mu.Unlock()
		if n == 3 {
			break
		}
	}
	svc.Close()
	g.mu.Lock()
	defer g.mu.Unlock()
	if len(g.calls) != 3 || len(g.settled) != 3 {
		t.Fatalf("%d admitted, %d settled", len(g.calls), len(g.settled))
	}
	c := g.calls[0]
	if c.Meta.Source != llm.SourceVoice || c.Request.ReserveInputTokens != 30*voice.InputTokensPerSecond || c.Meta.Subject != "ana" {
		t.Fatalf("admitted %+v", c)
	}
	for _, r := range g.settled {
		if !r.UsageReported || r.Usage.InputTokens != 10 || r.Usage.OutputTokens == 0 {
			t.Fatalf("settled %+v", r)
		}
	}
	if f.Mints() != 3 {
		t.Fatalf("%d mints", f.Mints())
	}
}

func TestClampShortensAndCloseSettles(t *testing.T) {
	g := &gate{clampTo: 2 * voice.OutputTokensPerSecond}
	svc, f := setup(t, g)
	s, err := svc.Mint(context.Background(), "talker", voice.Who{})
	if err != nil {
		t.Fatal(err)
	}
	if s.MaxSeconds != 2 {
		t.Fatalf("a clamped admission left %d s", s.MaxSeconds)
	}
	svc.Close() // before the cap: hung up and settled now
	if !f.Ended(s.ID) {
		t.Fatal("Close did not hang the session up")
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if len(g.settled) != 1 || g.settled[0].UsageReported {
		t.Fatalf("settled %+v", g.settled)
	}
	if _, err := svc.Mint(context.Background(), "mute", voice.Who{}); err == nil {
		t.Fatal("an agent without voice minted")
	}
}
