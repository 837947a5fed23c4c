package e2e

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/client"

	"github.com/agentryhq/agentry/dev/gatewaytest"
	"github.com/agentryhq/agentry/models"
)

const reporterAgent = `
id: reporter
trigger: cron
schedule:
  cron: "@every 2s"
  prompt: status report please
  output: {channel: webhook}
`

// ownSchedules lists the schedules of a gateway's installation (its task
// queue prefix) as Temporal has them.
func ownSchedules(t *testing.T, c client.Client, prefix string) []string {
	t.Helper()
	iter, err := c.ScheduleClient().List(context.Background(), client.ScheduleListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for iter.HasNext() {
		e, err := iter.Next()
		if err != nil {
			t.Fatal(err)
		}
		if strings.HasPrefix(e.ID, prefix) {
			ids = append(ids, e.ID)
		}
	}
	return ids
}

func scheduleExists(t *testing.T, c client.Client, id string) bool {
	// The shared embedded Temporal can be slow under -race on 2 cores: a
	// describe that times out is asked again rather than failing the test.
	var err error
	for attempt := 0; attempt < 4; attempt++ {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		_, err = c.ScheduleClient().GetHandle(ctx, id).Describe(ctx)
		cancel()
		var nf *serviceerror.NotFound
		if errors.As(err, &nf) {
			return false
		}
		if err == nil {
			return true
		}
		if !errors.Is(err, context.DeadlineExceeded) && !strings.Contains(err.Error(), "deadline exceeded") {
			break
		}
	}
	t.Fatal(err)
	return false
}

// deleteScheduleAfter removes a schedule from the shared Temporal at the
// end of the test (the gateway is gone by then; its schedule would keep
// firing into an unpolled task queue).
func deleteScheduleAfter(t *testing.T, addr, id string) {
	t.Cleanup(func() {
		c, err := client.Dial(client.Options{HostPort: addr})
		if err != nil {
			return
		}
		defer c.Close()
		_ = c.ScheduleClient().GetHandle(context.Background(), id).Delete(context.Background())
	})
}

func scheduledBodies(rcv *sigReceiver) []map[string]any {
	_, _, bodies, _, _ := rcv.snapshot()
	var out []map[string]any
	for _, b := range bodies {
		if b["source"] == "schedule" {
			out = append(out, b)
		}
	}
	return out
}

func TestCronAgentFiresDeliversAndSurvivesRestart(t *testing.T) {
	rcv := newSigReceiver(t, "cron-secret")
	ws := t.TempDir()
	cfg := deliveryConfig(rcv.URL(), "cron-secret", "")
	opts := gatewaytest.Options{Workspace: ws, Config: cfg, Agents: map[string]string{"reporter.yaml": reporterAgent, "helper.yaml": "id: helper\n"}}
	g := gatewaytest.Start(t, opts)
	addr := gatewaytest.SharedTemporal(t)
	prefix := g.Config.Temporal.TaskQueue + ":schedule:"
	sid := prefix + "reporter"
	deleteScheduleAfter(t, addr, sid)

	// It fires every 2 s and each reply reaches the webhook channel, signed.
	waitUntil(t, 60*time.Second, "two scheduled deliveries", func() bool { return len(scheduledBodies(rcv)) >= 2 })
	b := scheduledBodies(rcv)[0]
	if b["text"] != "echo: status report please" || b["agent_id"] != "reporter" || b["channel"] != "webhook" || b["run_id"] == "" {
		t.Fatalf("body %v", b)
	}
	if _, _, _, _, bad := rcv.snapshot(); len(bad) != 0 {
		t.Fatalf("bad signatures %v", bad)
	}
	// The ledger records the source scheduled, through cost admission.
	var n int64
	g.Store.DB.Model(&models.LedgerEntry{}).Where("source = ? AND agent_id = ?", "scheduled", "reporter").Count(&n)
	if n < 2 {
		t.Fatalf("%d scheduled ledger rows", n)
	}

	// REST: next fire times and the last outcome.
	r := g.Do("GET", "/api/v1/schedules", nil)
	list := r.JSON["schedules"].([]any)
	if r.Status != 200 || len(list) != 1 {
		t.Fatalf("list %d %s", r.Status, r.Raw)
	}
	s := list[0].(map[string]any)
	next := s["next_fire_times"].([]any)
	if s["agent_id"] != "reporter" || s["cron"] != "@every 2s" || s["timezone"] != "UTC" || s["paused"] != false || s["synced"] != true || len(next) == 0 {
		t.Fatalf("schedule %v", s)
	}
	if _, err := time.Parse(time.RFC3339, next[0].(string)); err != nil {
		t.Fatalf("next fire time %v", next[0])
	}
	waitUntil(t, 10*time.Second, "a finished last outcome", func() bool {
		s := g.Do("GET", "/api/v1/schedules", nil).JSON["schedules"].([]any)[0].(map[string]any)
		o, _ := s["last_outcome"].(map[string]any)
		return o != nil && o["status"] == "succeeded"
	})

	// Trigger now.
	tr := g.Do("POST", "/api/v1/schedules/reporter/trigger", nil)
	wid, _ := tr.JSON["workflow_id"].(string)
	if tr.Status != 202 || !strings.Contains(wid, "-manual-") {
		t.Fatalf("trigger: %d %s", tr.Status, tr.Raw)
	}
	waitUntil(t, 30*time.Second, "the manual firing", func() bool {
		var run models.ScheduleRun
		return g.Store.DB.First(&run, "workflow_id = ?", wid).Error == nil && run.Status == "succeeded" && run.Trigger == "manual"
	})
	if r := g.Do("POST", "/api/v1/schedules/helper/trigger", nil); r.Status != 404 {
		t.Fatalf("trigger of a non-cron agent: %d", r.Status)
	}

	// Restart: a second gateway on the same workspace and task queue.
	if ids := ownSchedules(t, g.Temporal, prefix); len(ids) != 1 || ids[0] != sid {
		t.Fatalf("schedules before restart: %v", ids)
	}
	g.Shutdown(context.Background())
	before := len(scheduledBodies(rcv))
	g2 := gatewaytest.Start(t, gatewaytest.Options{Workspace: ws, Config: cfg})
	if g2.Config.Temporal.TaskQueue+":schedule:reporter" != sid {
		t.Fatal("restart changed the task queue")
	}
	waitUntil(t, 60*time.Second, "deliveries after the restart", func() bool { return len(scheduledBodies(rcv)) >= before+2 })
	time.Sleep(2 * time.Second) // let visibility catch up
	if ids := ownSchedules(t, g2.Temporal, prefix); len(ids) != 1 || ids[0] != sid {
		t.Fatalf("schedules after restart: %v (want exactly %s)", ids, sid)
	}
	desc, err := g2.Temporal.ScheduleClient().GetHandle(context.Background(), sid).Describe(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if desc.Schedule.Policy.Overlap.String() != "Skip" || desc.Schedule.Policy.CatchupWindow != 10*time.Minute || desc.Schedule.Spec.TimeZoneName != "UTC" {
		t.Fatalf("policy %+v spec tz %q", desc.Schedule.Policy, desc.Schedule.Spec.TimeZoneName)
	}

	// Definitions change: disabled -> paused; new cron -> updated; removed -> deleted.
	agentFile := filepath.Join(ws, "agents", "reporter.yaml")
	write := func(body string) {
		if err := os.WriteFile(agentFile, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		if r := g2.Do("POST", "/api/v1/agents/reload", nil); r.Status != 200 {
			t.Fatalf("reload: %d %s", r.Status, r.Raw)
		}
	}
	describe := func() *client.ScheduleDescription {
		d, err := g2.Temporal.ScheduleClient().GetHandle(context.Background(), sid).Describe(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		return d
	}
	write(reporterAgent + "enabled: false\n")
	waitUntil(t, 20*time.Second, "the schedule to pause", func() bool { return describe().Schedule.State.Paused })
	write(strings.Replace(reporterAgent, "@every 2s", "0 9 * * 1-5", 1) + "  timezone: Europe/Berlin\n")
	waitUntil(t, 20*time.Second, "the schedule to update", func() bool {
		d := describe()
		return !d.Schedule.State.Paused && d.Schedule.Spec.TimeZoneName == "Europe/Berlin"
	})
	s = g2.Do("GET", "/api/v1/schedules", nil).JSON["schedules"].([]any)[0].(map[string]any)
	if first, _ := time.Parse(time.RFC3339, s["next_fire_times"].([]any)[0].(string)); first.In(mustZone(t, "Europe/Berlin")).Hour() != 9 {
		t.Fatalf("next fire %v", s["next_fire_times"])
	}
	if err := os.Remove(agentFile); err != nil {
		t.Fatal(err)
	}
	g2.Do("POST", "/api/v1/agents/reload", nil)
	waitUntil(t, 20*time.Second, "the orphan schedule to go", func() bool { return !scheduleExists(t, g2.Temporal, sid) })
	if r := g2.Do("GET", "/api/v1/schedules", nil); len(r.JSON["schedules"].([]any)) != 0 {
		t.Fatalf("schedules %s", r.Raw)
	}
}

func mustZone(t *testing.T, name string) *time.Location {
	loc, err := time.LoadLocation(name)
	if err != nil {
		t.Fatal(err)
	}
	return loc
}

func TestScheduledRunRejectedByCostsIsSkipped(t *testing.T) {
	rcv := newSigReceiver(t, "")
	g := gatewaytest.Start(t, gatewaytest.Options{
		Config: deliveryConfig(rcv.URL(), "", "") + "costs: {unknown_pricing: block}\n",
		Agents: map[string]string{"reporter.yaml": strings.Replace(reporterAgent, "@every 2s", "0 0 1 1 *", 1)},
	})
	deleteScheduleAfter(t, gatewaytest.SharedTemporal(t), g.Config.Temporal.TaskQueue+":schedule:reporter")
	tr := g.Do("POST", "/api/v1/schedules/reporter/trigger", nil)
	if tr.Status != 202 {
		t.Fatalf("%d %s", tr.Status, tr.Raw)
	}
	var run models.ScheduleRun
	waitUntil(t, 30*time.Second, "the skipped firing", func() bool {
		return g.Store.DB.First(&run, "workflow_id = ?", tr.JSON["workflow_id"]).Error == nil && run.Status != "running"
	})
	if run.Status != "skipped" || run.Code != "unknown_pricing" || !strings.Contains(run.Error, "cost admission") {
		t.Fatalf("firing %+v", run)
	}
	if g.Fake.CallCount() != 0 || len(scheduledBodies(rcv)) != 0 {
		t.Fatal("a refused run reached the provider or the channel")
	}
	s := g.Do("GET", "/api/v1/schedules", nil).JSON["schedules"].([]any)[0].(map[string]any)
	if o := s["last_outcome"].(map[string]any); o["status"] != "skipped" || !strings.Contains(fmt.Sprint(o["error"]), "cost admission") {
		t.Fatalf("last outcome %v", o)
	}
}

func TestCronExpressionThatDoesNotParseFailsValidation(t *testing.T) {
	g := gatewaytest.Start(t, gatewaytest.Options{Agents: map[string]string{
		"bad.yaml": "id: bad\ntrigger: cron\nschedule: {cron: 'every tuesday at noon'}\n"}})
	r := g.Do("POST", "/api/v1/agents/reload", nil)
	if !strings.Contains(string(r.Raw), "schedule.cron") || !strings.Contains(string(r.Raw), "every tuesday at noon") {
		t.Fatalf("reload: %s", r.Raw)
	}
	if r := g.Do("GET", "/api/v1/schedules", nil); len(r.JSON["schedules"].([]any)) != 0 {
		t.Fatalf("invalid agent scheduled: %s", r.Raw)
	}
}
