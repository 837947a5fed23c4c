package fakediscord_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/agentryhq/agentry/dev/fakediscord"
)

const (
	token = "tok"
	botID = "900000000000000001"
)

type frame struct {
	Op int             `json:"op"`
	S  int64           `json:"s"`
	T  string          `json:"t"`
	D  json.RawMessage `json:"d"`
}

func start(t *testing.T) *fakediscord.Server {
	t.Helper()
	fk, err := fakediscord.Start(token, botID)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(fk.Close)
	return fk
}

func call(t *testing.T, fk *fakediscord.Server, method, path, auth, body string) (int, http.Header, []byte) {
	t.Helper()
	req, err := http.NewRequest(method, fk.APIBase()+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if auth != "" {
		req.Header.Set("Authorization", auth)
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header, b
}

func dial(t *testing.T, fk *fakediscord.Server) *websocket.Conn {
	t.Helper()
	_, _, b := call(t, fk, "GET", "/api/v10/gateway/bot", "Bot "+token, "")
	var g struct{ URL string }
	if err := json.Unmarshal(b, &g); err != nil || !strings.HasPrefix(g.URL, "ws://127.0.0.1:") {
		t.Fatalf("gateway/bot answered %s", b)
	}
	c, _, err := websocket.DefaultDialer.Dial(g.URL+"/?v=10&encoding=json", nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	if f := read(t, c); f.Op != 10 || !strings.Contains(string(f.D), "heartbeat_interval") {
		t.Fatalf("first frame %+v, want HELLO", f)
	}
	return c
}

func read(t *testing.T, c *websocket.Conn) frame {
	t.Helper()
	_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
	var f frame
	if err := c.ReadJSON(&f); err != nil {
		t.Fatalf("read: %v", err)
	}
	return f
}

func send(t *testing.T, c *websocket.Conn, op int, d any) {
	t.Helper()
	if err := c.WriteJSON(map[string]any{"op": op, "d": d}); err != nil {
		t.Fatal(err)
	}
}

func TestGatewayIdentifyHeartbeatDispatchAndResume(t *testing.T) {
	fk := start(t)
	c := dial(t, fk)
	send(t, c, 2, map[string]any{"token": "Bot " + token, "intents": 37376, "properties": map[string]string{}})
	ready := read(t, c)
	var r struct {
		SessionID string `json:"session_id"`
		Resume    string `json:"resume_gateway_url"`
		User      struct{ ID string }
	}
	_ = json.Unmarshal(ready.D, &r)
	if ready.T != "READY" || ready.S != 1 || r.SessionID == "" || r.User.ID != botID || r.Resume == "" {
		t.Fatalf("READY %+v %s", ready, ready.D)
	}
	send(t, c, 1, 1)
	if f := read(t, c); f.Op != 11 {
		t.Fatalf("heartbeat answered %+v", f)
	}
	fk.PostOffline("600", "700", "800", "not dispatched")
	id := fk.Post("600", "700", "800", "hello", fakediscord.MentionBot())
	mc := read(t, c)
	var m struct {
		ID, Content string
		GuildID     string `json:"guild_id"`
		Mentions    []struct{ ID string }
	}
	_ = json.Unmarshal(mc.D, &m)
	if mc.T != "MESSAGE_CREATE" || mc.S != 2 || m.ID != id || m.Content != "<@"+botID+"> hello" || m.GuildID != "700" ||
		len(m.Mentions) != 1 || m.Mentions[0].ID != botID {
		t.Fatalf("dispatch %+v %s", mc, mc.D)
	}

	fk.DropConnections()
	if _, _, err := c.ReadMessage(); err == nil {
		t.Fatal("the dropped socket still reads")
	} else if websocket.IsCloseError(err, websocket.CloseNormalClosure) {
		t.Fatal("a drop sent a close frame")
	}
	missed := []string{fk.Post("600", "700", "800", "m1"), fk.Post("600", "", "800", "m2")}

	c2 := dial(t, fk)
	send(t, c2, 6, map[string]any{"token": "Bot " + token, "session_id": r.SessionID, "seq": 2})
	for i, want := range missed {
		f := read(t, c2)
		if f.T != "MESSAGE_CREATE" || f.S != int64(3+i) || !strings.Contains(string(f.D), want) {
			t.Fatalf("replay %d: %+v %s", i, f, f.D)
		}
	}
	if f := read(t, c2); f.T != "RESUMED" || f.S != 5 {
		t.Fatalf("after the replay %+v", f)
	}
	if fk.Resumes() != 1 || fk.Identifies() != 1 || fk.Heartbeats() != 1 {
		t.Fatalf("resumes %d identifies %d heartbeats %d", fk.Resumes(), fk.Identifies(), fk.Heartbeats())
	}
	// An unknown session cannot resume: op 9, not resumable.
	c3 := dial(t, fk)
	send(t, c3, 6, map[string]any{"token": "Bot " + token, "session_id": "nope", "seq": 1})
	if f := read(t, c3); f.Op != 9 || string(f.D) != "false" {
		t.Fatalf("unknown session answered %+v", f)
	}
}

func TestGatewayBadTokenClosesWith4004(t *testing.T) {
	fk := start(t)
	c := dial(t, fk)
	send(t, c, 2, map[string]any{"token": "Bot wrong", "intents": 1})
	_, _, err := c.ReadMessage()
	var ce *websocket.CloseError
	if !errors.As(err, &ce) || ce.Code != 4004 {
		t.Fatalf("bad token: %v", err)
	}
	if fk.Identifies() != 0 {
		t.Fatal("a refused identify was counted")
	}
}

func TestRESTAuthHistoryAndSends(t *testing.T) {
	fk := start(t)
	if code, _, _ := call(t, fk, "GET", "/api/v9/users/@me", "Bot wrong", ""); code != 401 {
		t.Fatalf("bad token answered %d", code)
	}
	if code, _, b := call(t, fk, "GET", "/api/v9/users/@me", "Bot "+token, ""); code != 200 || !strings.Contains(string(b), botID) {
		t.Fatalf("users/@me %d %s", code, b)
	}
	var ids []string
	for i := 0; i < 5; i++ {
		ids = append(ids, fk.PostOffline("600", "700", "800", fmt.Sprint(i)))
	}
	_, _, b := call(t, fk, "GET", "/api/v9/channels/600/messages?after="+ids[0]+"&limit=2", "Bot "+token, "")
	var page []struct{ ID, Content string }
	_ = json.Unmarshal(b, &page)
	// The two oldest after ids[0], newest first.
	if len(page) != 2 || page[0].ID != ids[2] || page[1].ID != ids[1] {
		t.Fatalf("history page %s", b)
	}
	if strings.Contains(string(b), "guild_id") {
		t.Fatal("REST messages carry guild_id (Discord's do not)")
	}
	if code, _, b := call(t, fk, "GET", "/api/v9/channels/600", "Bot "+token, ""); code != 200 || !strings.Contains(string(b), `"guild_id":"700"`) {
		t.Fatalf("channel %d %s", code, b)
	}

	fk.FailSends(1, 1500*time.Millisecond)
	code, h, b := call(t, fk, "POST", "/api/v10/channels/600/messages", "Bot "+token, `{"content":"x"}`)
	var rl struct {
		RetryAfter float64 `json:"retry_after"`
		Global     *bool   `json:"global"`
		Message    string  `json:"message"`
	}
	_ = json.Unmarshal(b, &rl)
	if code != 429 || rl.RetryAfter != 1.5 || rl.Global == nil || *rl.Global || rl.Message == "" ||
		h.Get("Retry-After") != "2" || h.Get("X-RateLimit-Remaining") != "0" || h.Get("X-RateLimit-Reset-After") != "1.500" {
		t.Fatalf("429: %d %v %s", code, h, b)
	}
	code, _, b = call(t, fk, "POST", "/api/v10/channels/600/messages", "Bot "+token,
		`{"content":"answer","message_reference":{"message_id":"`+ids[4]+`","fail_if_not_exists":false}}`)
	sent := fk.Sent()
	if code != 200 || len(sent) != 1 || sent[0].ReplyTo != ids[4] || sent[0].FailIfNotExists == nil || *sent[0].FailIfNotExists ||
		!strings.Contains(string(b), sent[0].ID) {
		t.Fatalf("send %d %s %+v", code, b, sent)
	}
	if code, _, _ := call(t, fk, "POST", "/api/v10/channels/999/messages", "Bot "+token, `{"content":"x"}`); code != 404 {
		t.Fatalf("unknown channel answered %d", code)
	}
}

func TestConcurrentPostsKeepSequenceOrder(t *testing.T) {
	fk := start(t)
	c := dial(t, fk)
	send(t, c, 2, map[string]any{"token": token, "intents": 1})
	read(t, c) // READY
	var wg sync.WaitGroup
	for g := 0; g < 4; g++ {
		wg.Add(1)
		go func(g int) {
			defer wg.Done()
			for i := 0; i < 10; i++ {
				fk.Post(fmt.Sprint(600+g), "700", "800", "x")
				_ = fk.Sent()
			}
		}(g)
	}
	wg.Wait()
	last := map[string]string{}
	for s := int64(2); s < 42; s++ {
		f := read(t, c)
		var m struct {
			ID        string
			ChannelID string `json:"channel_id"`
		}
		_ = json.Unmarshal(f.D, &m)
		if f.S != s || len(m.ID) < len(last[m.ChannelID]) || m.ID <= last[m.ChannelID] {
			t.Fatalf("frame %d: s=%d id %s after %s", s, f.S, m.ID, last[m.ChannelID])
		}
		last[m.ChannelID] = m.ID
	}
}
