package probe

import (
	"context"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"strconv"
	"strings"
	"sync"
	"time"

	"go.temporal.io/api/enums/v1"
	temporalclient "go.temporal.io/sdk/client"
	sdklog "go.temporal.io/sdk/log"

	"github.com/agentryhq/agentry/dev/fakellm"
	"github.com/agentryhq/agentry/workflows"
)

// Crash is the third part of the report.
type Crash struct {
	Kills int `json:"kills"`
	// KillDelaysMs are the moments of the kills after the work started.
	KillDelaysMs []int `json:"kill_delays_ms"`
	// Items is the work started before the kills, by kind.
	Items map[string]int `json:"items"`
	// Finished: records that reached an end state after the restart.
	Finished int `json:"finished_after_restart"`
	// Orphaned: records still pending/queued/running after the settle
	// bound with no open workflow. Must be 0.
	Orphaned int `json:"orphaned"`
	// Stuck: records still unfinished after the bound while their
	// workflow is open (slow, not lost). Must be 0 too: nothing the probe
	// asks takes that long.
	Stuck int `json:"stuck"`
	// Lost: work answered 202 whose record is gone. Must be 0.
	Lost int `json:"lost"`
	// BlockedClaims: Idempotency-Key retries still refused after the
	// bound (a dead claim that outlives its lease). Must be 0.
	BlockedClaims int `json:"blocked_idempotency_claims"`
	// SlowestClaimMs is the longest a retry with the key of a request cut
	// by the kill waited to be served.
	SlowestClaimMs int `json:"slowest_claim_takeover_ms"`
	// Provider calls for the killed work versus provider requests counted
	// on the ledger rows (attempts); MissingLedger = the difference when
	// the provider saw more. Must be 0.
	ProviderCalls int      `json:"provider_calls"`
	LedgerCalls   int      `json:"ledger_attempts"`
	MissingLedger int      `json:"missing_ledger_calls"`
	Examples      []string `json:"examples,omitempty"`
}

// item is one piece of work that promises a workflow.
type item struct {
	kind   string // task run | delivery | async webhook | idempotent webhook
	taskID string
	// id is the record id from the 202 answer ("" when the kill came
	// first).
	id   string
	key  string // Idempotency-Key
	body string // sent again, as a client's retry does
}

const settleTimeout = 90 * time.Second

// runCrashes kills the gateway kills times while work is in flight and
// checks what the restarted gateway makes of it.
func runCrashes(g *gatewayProc, c *client, fake *fakellm.Server, seed uint64, kills int, logf func(string, ...any)) (*Crash, error) {
	rep := &Crash{Items: map[string]int{}}
	rng := rand.New(rand.NewPCG(seed, 3))
	// Every provider answer for the crash work takes a while, so kills
	// land before, during and after provider calls.
	fake.AddRules(fakellm.Rule{Model: modelCrash, Delay: fakellm.Duration(800 * time.Millisecond)})
	example := func(format string, args ...any) {
		if len(rep.Examples) < 30 {
			rep.Examples = append(rep.Examples, fmt.Sprintf(format, args...))
		}
	}
	for k := 0; k < kills; k++ {
		items := startWork(c, k)
		delay := time.Duration(rng.IntN(2500)) * time.Millisecond
		time.Sleep(delay)
		if err := g.crash(); err != nil {
			return rep, err
		}
		rep.Kills++
		rep.KillDelaysMs = append(rep.KillDelaysMs, int(delay/time.Millisecond))
		wait := items.wait()
		if err := g.start(); err != nil {
			return rep, fmt.Errorf("restart after kill %d: %w", k+1, err)
		}
		logf("kill %d/%d after %s; restarted", k+1, kills, delay)
		tc, err := temporalclient.Dial(temporalclient.Options{HostPort: g.temporalAddr, Namespace: "default",
			Logger: sdklog.NewStructuredLogger(slog.New(slog.DiscardHandler))})
		if err != nil {
			return rep, fmt.Errorf("temporal: %w", err)
		}
		for _, it := range wait {
			rep.Items[it.kind]++
			settle(c, tc, it, rep, example)
		}
		tc.Close()
	}
	// The ledger counts every provider request of the killed work.
	for _, call := range fake.Calls() {
		if call.Model == modelCrash {
			rep.ProviderCalls++
		}
	}
	for _, agent := range []string{"crash", "crashhook"} {
		a := c.call("GET", "/api/v1/costs/calls?limit=1000&agent_id="+agent, nil)
		rows, _ := a.JSON["calls"].([]any)
		for _, r := range rows {
			if m, ok := r.(map[string]any); ok {
				n, _ := m["attempts"].(float64)
				rep.LedgerCalls += int(n)
			}
		}
	}
	if rep.ProviderCalls > rep.LedgerCalls {
		rep.MissingLedger = rep.ProviderCalls - rep.LedgerCalls
		example("the provider saw %d calls for the killed work, the ledger counts %d", rep.ProviderCalls, rep.LedgerCalls)
	}
	return rep, nil
}

// pending is the work of one round; wait collects it after the kill.
type pending struct {
	mu    sync.Mutex
	items []*item
	wg    sync.WaitGroup
}

func (p *pending) wait() []*item {
	p.wg.Wait()
	return p.items
}

// startWork starts one of each kind of work; the requests run on while
// the gateway is killed.
func startWork(c *client, k int) *pending {
	p := &pending{}
	task := c.call("POST", "/api/v1/workboard/tasks", map[string]any{"title": fmt.Sprintf("crash work %d", k), "agent_id": "crash"})
	add := func(it *item, r request, idField string) {
		p.items = append(p.items, it)
		p.wg.Add(1)
		go func() {
			defer p.wg.Done()
			a := c.send(r)
			if a.Status == 202 || a.Status == 200 {
				p.mu.Lock()
				it.id = a.id(idField)
				p.mu.Unlock()
			}
		}()
	}
	auth := "Bearer " + c.key
	if taskID := task.id("id"); taskID != "" {
		add(&item{kind: "task run", taskID: taskID}, request{Method: "POST", Path: "/api/v1/workboard/tasks/" + taskID + "/run", Auth: auth}, "id")
	}
	add(&item{kind: "delivery"}, request{Method: "POST", Path: "/api/v1/channels/webhook/send", Auth: auth,
		Body: []byte(fmt.Sprintf(`{"text":"crash delivery %d"}`, k))}, "delivery_id")
	add(&item{kind: "async webhook"}, request{Method: "POST", Path: "/api/v1/webhooks/crashhook?async=true", Auth: auth,
		Body: []byte(fmt.Sprintf(`{"text":"crash async %d"}`, k))}, "run_id")
	key := fmt.Sprintf("probe-crash-%d", k)
	body := fmt.Sprintf(`{"text":"crash idempotent %d"}`, k)
	add(&item{kind: "idempotent webhook", key: key, body: body}, request{Method: "POST", Path: "/api/v1/webhooks/crashhook", Auth: auth,
		Headers: map[string]string{"Idempotency-Key": key}, Body: []byte(body)}, "run_id")
	return p
}

// settle follows one item after the restart until it ends or the bound
// passes, and classifies it.
func settle(c *client, tc temporalclient.Client, it *item, rep *Crash, example func(string, ...any)) {
	deadline := time.Now().Add(settleTimeout)
	switch it.kind {
	case "idempotent webhook":
		settleClaim(c, it, rep, example, deadline)
		return
	case "task run":
		// Every run of the task, whether or not its 202 came back.
		for {
			a := c.call("GET", "/api/v1/workboard/tasks/"+it.taskID+"/runs", nil)
			runs, _ := a.JSON["runs"].([]any)
			open := []string{}
			for _, r := range runs {
				m, _ := r.(map[string]any)
				if st, _ := m["status"].(string); !ended(st) {
					open = append(open, fmt.Sprintf("run %v %s", m["id"], st))
				}
			}
			if it.id != "" && !hasRun(runs, it.id) {
				rep.Lost++
				example("task %s: run %s answered 202 and is gone", it.taskID, it.id)
				return
			}
			if len(open) == 0 {
				if len(runs) > 0 {
					rep.Finished++
				}
				return
			}
			if time.Now().After(deadline) {
				classify(tc, workflows.TaskRunWorkflowID(atoi(it.taskID)), rep, example, fmt.Sprintf("task %s: %s", it.taskID, strings.Join(open, ", ")))
				return
			}
			time.Sleep(250 * time.Millisecond)
		}
	case "delivery", "async webhook":
		if it.id == "" {
			return // killed before the record was promised
		}
		path := "/api/v1/deliveries/" + it.id
		if it.kind == "async webhook" {
			path = "/api/v1/webhooks/crashhook/runs/" + it.id
		}
		for {
			a := c.call("GET", path, nil)
			if a.Status == 404 {
				rep.Lost++
				example("%s %s answered 202 and is gone", it.kind, it.id)
				return
			}
			st, _ := a.JSON["status"].(string)
			if ended(st) {
				rep.Finished++
				return
			}
			if time.Now().After(deadline) {
				wf, _ := a.JSON["workflow_id"].(string)
				if it.kind == "async webhook" {
					wf = workflows.WebhookRunWorkflowID(it.id)
				}
				classify(tc, wf, rep, example, fmt.Sprintf("%s %s %s", it.kind, it.id, st))
				return
			}
			time.Sleep(250 * time.Millisecond)
		}
	}
}

// settleClaim retries a webhook whose Idempotency-Key was in flight at the
// kill: it must be served once the dead claim's lease lapses, and each
// refusal must come at once with Retry-After.
func settleClaim(c *client, it *item, rep *Crash, example func(string, ...any), deadline time.Time) {
	began := time.Now()
	for {
		a := c.send(request{Method: "POST", Path: "/api/v1/webhooks/crashhook", Auth: "Bearer " + c.key,
			Headers: map[string]string{"Idempotency-Key": it.key}, Body: []byte(it.body)})
		if a.Status == 200 {
			rep.Finished++
			rep.SlowestClaimMs = max(rep.SlowestClaimMs, int(time.Since(began)/time.Millisecond))
			return
		}
		if a.Status != 409 || time.Now().After(deadline) {
			rep.BlockedClaims++
			example("retry with key %s: %d %.200s (after %s)", it.key, a.Status, a.Raw, time.Since(began).Round(time.Second))
			return
		}
		wait, err := strconv.Atoi(a.Header.Get("Retry-After"))
		if err != nil || wait < 1 {
			wait = 1
		}
		time.Sleep(time.Duration(min(wait, 10)) * time.Second)
	}
}

// classify counts an unfinished record as orphaned (no open workflow) or
// stuck (its workflow is open).
func classify(tc temporalclient.Client, workflowID string, rep *Crash, example func(string, ...any), what string) {
	open := false
	if workflowID != "" {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		d, err := tc.DescribeWorkflowExecution(ctx, workflowID, "")
		cancel()
		open = err == nil && d.GetWorkflowExecutionInfo().GetStatus() == enums.WORKFLOW_EXECUTION_STATUS_RUNNING
	}
	if open {
		rep.Stuck++
		example("stuck %s after %s (workflow %s open)", what, settleTimeout, workflowID)
		return
	}
	rep.Orphaned++
	example("orphaned %s after %s (no open workflow %q)", what, settleTimeout, workflowID)
}

func ended(status string) bool {
	switch status {
	case "finished", "failed", "cancelled", "delivered", "succeeded":
		return true
	}
	return false
}

func hasRun(runs []any, id string) bool {
	for _, r := range runs {
		if m, ok := r.(map[string]any); ok && fmt.Sprint(m["id"]) == id {
			return true
		}
	}
	return false
}

func atoi(s string) int64 {
	n, _ := strconv.ParseInt(s, 10, 64)
	return n
}
