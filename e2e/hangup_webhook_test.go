package e2e

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentryhq/agentry/dev/fakellm"
	"github.com/agentryhq/agentry/dev/gatewaytest"
)

// hookAgent maps every payload's "thread" to one session, so requests with
// the same thread queue behind each other (chats of a session never
// overlap).
const hookAgent = "id: hook\ntrigger: webhook\nllm: {provider: ollama, model: llama3.2}\nwebhook: {text_path: text, thread_id_path: thread}\n"

// postHook posts a synchronous webhook over real HTTP on loopback and
// hangs up after giveUp (0: waits for the answer). It returns the status,
// or 0 when the client hung up first.
func postHook(t *testing.T, g *gatewaytest.Gateway, body string, giveUp time.Duration) int {
	t.Helper()
	ctx := context.Background()
	if giveUp > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, giveUp)
		defer cancel()
	}
	req, _ := http.NewRequestWithContext(ctx, "POST", g.URL()+"/api/v1/webhooks/hook", strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+gatewaytest.TestAPIKey)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0
	}
	resp.Body.Close()
	return resp.StatusCode
}

// TestWebhookClientDisconnectCancelsUpstream: a synchronous webhook whose
// caller hangs up cancels its provider call like POST /chat: the run is
// recorded cancelled, the ledger row cancelled, no exchange stored. Before
// #42 it ran to the end (10 of 10 in the probe) and the exchange was kept.
func TestWebhookClientDisconnectCancelsUpstream(t *testing.T) {
	g := gatewaytest.Start(t, gatewaytest.Options{Agents: map[string]string{"hook.yaml": hookAgent}})
	g.Fake.Script(fakellm.Rule{Contains: "slow", Reply: "too late", Delay: fakellm.Duration(5 * time.Second)})
	started := time.Now()
	if status := postHook(t, g, `{"text":"slow please","thread":"t1"}`, 300*time.Millisecond); status != 0 {
		t.Fatalf("the webhook answered %d before the provider did", status)
	}
	expectCancelledRun(t, g, "hook", "", started, 5*time.Second)
}

// TestWebhookQueuedCallersThatLeftNeverReachProvider: nine webhook calls of
// one session; the first holds the session at the provider, the eight
// queued behind it hang up. None of the eight may reach the provider once
// the first is done (#42: 8 of 9 did, each cancelled within 50 ms), and a
// caller who stays is still served afterwards.
func TestWebhookQueuedCallersThatLeftNeverReachProvider(t *testing.T) {
	g := gatewaytest.Start(t, gatewaytest.Options{Agents: map[string]string{"hook.yaml": hookAgent}})
	g.Fake.Script(fakellm.Rule{Contains: "first", Reply: "first done", Delay: fakellm.Duration(3 * time.Second)})
	firstDone := make(chan int, 1)
	go func() { firstDone <- postHook(t, g, `{"text":"first","thread":"queue"}`, 0) }()
	waitCalls(t, g.Fake, 1)
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if status := postHook(t, g, fmt.Sprintf(`{"text":"queued %d","thread":"queue"}`, i), 500*time.Millisecond); status != 0 {
				t.Errorf("queued call %d answered %d while the first held the session", i, status)
			}
		}()
	}
	wg.Wait()
	if status := <-firstDone; status != http.StatusOK {
		t.Fatalf("first call: %d", status)
	}
	// The one who stayed is served; by then every queue entry of those
	// who left has been passed.
	if status := postHook(t, g, `{"text":"after","thread":"queue"}`, 0); status != http.StatusOK {
		t.Fatalf("call after the queue: %d", status)
	}
	var texts []string
	for _, c := range g.Fake.Calls() {
		texts = append(texts, c.LastUserMessage)
	}
	if len(texts) != 2 {
		t.Fatalf("provider calls %d, want 2 (the first and the last; none of the 8 that left): %q", len(texts), texts)
	}
	var msgs int64
	g.Store.DB.Table("chat_messages").Where("content LIKE ?", "queued%").Count(&msgs)
	if msgs != 0 {
		t.Fatalf("%d messages of callers that left were stored", msgs)
	}
}

// waitCalls waits until the fake provider has seen n calls.
func waitCalls(t *testing.T, fake *fakellm.Server, n int) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for fake.CallCount() < n {
		if time.Now().After(deadline) {
			t.Fatalf("provider saw %d calls, want %d", fake.CallCount(), n)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
