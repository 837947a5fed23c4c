package delivery

import (
	"context"
	"encoding/json"
	"errors"
	"reflect"
	"sync"
	"testing"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/client"

	"github.com/agentryhq/agentry/internal/config"
	"github.com/agentryhq/agentry/internal/netguard"
	"github.com/agentryhq/agentry/internal/secrets"
	"github.com/agentryhq/agentry/models"
	"github.com/agentryhq/agentry/workflows"
)

// The input is a wire format (workflow histories, the outbox column): the
// builder yields exactly what the callers used to write out by hand.
func TestChannelInputIsTheWireFormat(t *testing.T) {
	at := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	m := ChannelMessage{DeliveryID: "dlv_1", Channel: "webhook", Text: "hi", To: "https://x.example/in", AgentID: "a",
		Source: SourceSchedule, SessionID: "s", RunID: "r", CreatedAt: at}
	got, err := ChannelInput(m, workflows.DeliveryRetry{RetryFor: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	body, _ := json.Marshal(m)
	want := workflows.DeliveryInput{Version: workflows.DeliveryInputVersion, DeliveryID: "dlv_1", Channel: "webhook", To: "https://x.example/in",
		Body: string(body), Source: SourceSchedule, AgentID: "a", Retry: workflows.DeliveryRetry{RetryFor: time.Hour}.WithDefaults()}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("ChannelInput =\n%+v\nwant\n%+v", got, want)
	}
	wire, _ := json.Marshal(got)
	const shape = `{"version":1,"delivery_id":"dlv_1","channel":"webhook","to":"https://x.example/in","body":` +
		`"{\"delivery_id\":\"dlv_1\",\"channel\":\"webhook\",\"text\":\"hi\",\"to\":\"https://x.example/in\",\"agent_id\":\"a\",\"source\":\"schedule\",` +
		`\"session_id\":\"s\",\"run_id\":\"r\",\"created_at\":\"2026-01-02T03:04:05Z\"}","source":"schedule","agent_id":"a",` +
		`"retry":{"initial_interval":1000000000,"max_interval":600000000000,"retry_for":3600000000000,"attempt_timeout":30000000000}}`
	if string(wire) != shape {
		t.Fatalf("wire form changed:\n%s\nwant\n%s", wire, shape)
	}
}

func TestHookInputIsTheWireFormat(t *testing.T) {
	ev := models.Event{ID: 7, Type: "run.finished", AgentID: "a"}
	hook := Hook{Key: "k1", URL: "https://h.example/hook", SecretEnv: "HOOK_SECRET"}
	got, err := HookInput(HookDeliveryID(hook.Key, ev.ID), hook, ev, workflows.DeliveryRetry{})
	if err != nil {
		t.Fatal(err)
	}
	body, _ := json.Marshal(HookBody{DeliveryID: "dlv_hook_k1_7", Type: ev.Type, Event: ev})
	want := workflows.DeliveryInput{Version: workflows.DeliveryInputVersion, DeliveryID: "dlv_hook_k1_7", Channel: "hook:k1",
		Hook: &workflows.HookTarget{URL: hook.URL, SecretEnv: "HOOK_SECRET"}, Body: string(body), Source: SourceHook, AgentID: "a",
		Retry: workflows.DeliveryRetry{}.WithDefaults()}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("HookInput =\n%+v\nwant\n%+v", got, want)
	}
}

func TestRecordOfAnInput(t *testing.T) {
	msg := workflows.DeliveryInput{DeliveryID: "dlv_2", Channel: "webhook", Source: SourceWebhook, AgentID: "a"}
	got := Record(msg, "https://user:pw@x.example/in?token=1")
	want := &models.Delivery{ID: "dlv_2", Channel: "webhook", Source: SourceWebhook, AgentID: "a",
		Target: DisplayURL("https://user:pw@x.example/in?token=1"), WorkflowID: workflows.DeliveryWorkflowID("dlv_2")}
	if !reflect.DeepEqual(got, want) || got.Target == "" || got.StartInput != "" {
		t.Fatalf("Record = %+v, want %+v", got, want)
	}
}

func TestDeliveryExecutionTimeout(t *testing.T) {
	r := workflows.DeliveryRetry{RetryFor: time.Hour, AttemptTimeout: time.Minute}
	if got := workflows.DeliveryExecutionTimeout(r); got != time.Hour+time.Minute+10*time.Minute {
		t.Fatalf("timeout = %v", got)
	}
	d := workflows.DeliveryRetry{}.WithDefaults()
	if got := workflows.DeliveryExecutionTimeout(workflows.DeliveryRetry{}); got != d.RetryFor+d.AttemptTimeout+10*time.Minute {
		t.Fatalf("timeout of the defaults = %v", got)
	}
}

// starts is a Temporal client that records the workflows started.
type starts struct {
	client.Client
	mu     sync.Mutex
	opts   []client.StartWorkflowOptions
	inputs []workflows.DeliveryInput
	fail   error
}

func (s *starts) ExecuteWorkflow(_ context.Context, o client.StartWorkflowOptions, wf any, args ...any) (client.WorkflowRun, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if wf != workflows.DeliveryWorkflowName {
		return nil, errors.New("not the Delivery workflow")
	}
	if s.fail != nil {
		return nil, s.fail
	}
	s.opts = append(s.opts, o)
	s.inputs = append(s.inputs, args[0].(workflows.DeliveryInput))
	return nil, nil
}

// Every way in (Send, an event hook, the outbox sweep) starts the Delivery
// workflow through one start with the same options.
func TestEveryDeliveryStartsTheSameWay(t *testing.T) {
	ctx := context.Background()
	st := openStore(t)
	cfg := config.Defaults()
	cfg.Channels.Webhook = config.WebhookChannelConfig{Enabled: true, URL: "https://h.example/in", Method: "POST"}
	ch := &Channels{Config: &cfg, Store: st, Secrets: secrets.New(st, t.TempDir()), Policy: netguard.Policy{Enabled: true},
		Resolver: fakeResolver{"h.example": {"93.184.216.34"}}}
	tc := &starts{}
	svc := &Service{Temporal: tc, TaskQueue: "q", Store: st, Channels: ch, Retry: workflows.DeliveryRetry{RetryFor: time.Hour}}

	id, err := svc.Send(ctx, SendRequest{Channel: "webhook", Text: "hello", AgentID: "a"})
	if err != nil {
		t.Fatal(err)
	}
	hooks := &Hooks{Deliveries: svc, Store: st}
	if err := hooks.Deliver(ctx, Hook{Key: "k", URL: "https://h.example/hook"}, models.Event{ID: 3, Type: "run.failed"}); err != nil {
		t.Fatal(err)
	}
	// An outbox entry left by a process that died before starting it.
	orphan, _ := ChannelInput(ChannelMessage{DeliveryID: "dlv_orphan", Channel: "webhook", Text: "late", Source: SourceSchedule}, svc.Retry)
	input, _ := json.Marshal(orphan)
	rec := Record(orphan, "https://h.example/in")
	rec.StartInput = string(input)
	if err := st.CreateDelivery(ctx, rec); err != nil {
		t.Fatal(err)
	}
	if n, err := svc.Sweep(ctx, time.Now().Add(time.Minute)); err != nil || n != 1 {
		t.Fatalf("sweep started %d: %v", n, err)
	}

	if len(tc.opts) != 3 {
		t.Fatalf("%d starts, want 3", len(tc.opts))
	}
	ids := []string{id, HookDeliveryID("k", 3), "dlv_orphan"}
	for i, o := range tc.opts {
		in := tc.inputs[i]
		if in.DeliveryID != ids[i] || o.ID != workflows.DeliveryWorkflowID(ids[i]) || o.TaskQueue != "q" ||
			o.WorkflowIDReusePolicy != enumspb.WORKFLOW_ID_REUSE_POLICY_REJECT_DUPLICATE ||
			o.WorkflowIDConflictPolicy != enumspb.WORKFLOW_ID_CONFLICT_POLICY_FAIL ||
			o.WorkflowExecutionTimeout != workflows.DeliveryExecutionTimeout(svc.Retry) || in.Retry != svc.Retry.WithDefaults() ||
			in.Version != workflows.DeliveryInputVersion {
			t.Errorf("start %d: options %+v input %+v", i, o, in)
		}
		d, _, err := st.GetDelivery(ctx, ids[i])
		if err != nil || d.StartInput != "" || d.WorkflowID != o.ID {
			t.Errorf("record %s after its start: %+v %v", ids[i], d, err)
		}
	}

	// A start Temporal refuses leaves the delivery failed, not pending.
	tc.fail = errors.New("unavailable")
	if _, err := svc.Send(ctx, SendRequest{Channel: "webhook", Text: "x"}); !errors.Is(err, ErrUnavailable) {
		t.Fatalf("send without Temporal: %v", err)
	}
	// "Already started" counts as started.
	tc.fail = serviceerror.NewWorkflowExecutionAlreadyStarted("started", "", "")
	if _, err := svc.Send(ctx, SendRequest{Channel: "webhook", Text: "y"}); err != nil {
		t.Fatalf("send of an already started delivery: %v", err)
	}
}
