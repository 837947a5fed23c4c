package schedules

import (
	"testing"
	"time"

	"github.com/agentryhq/agentry/internal/agentdef"
)

func TestSpec(t *testing.T) {
	for _, c := range []struct {
		cron, tz string
		wantCron string
		every    time.Duration
		wantTZ   string
	}{
		{"*/5 * * * *", "", "*/5 * * * *", 0, "UTC"},
		{"0 9 * * MON-FRI", "Europe/Berlin", "0 9 * * MON-FRI", 0, "Europe/Berlin"},
		{"@every 2s", "", "", 2 * time.Second, "UTC"},
		{"@every 1h30m", "", "", 90 * time.Minute, "UTC"},
		{"@daily", "", "0 0 * * *", 0, "UTC"},
		{"@midnight", "", "0 0 * * *", 0, "UTC"},
		{"@annually", "", "0 0 1 1 *", 0, "UTC"},
		{"@hourly", "America/New_York", "0 * * * *", 0, "America/New_York"},
		{"CRON_TZ=Asia/Tokyo 30 8 * * *", "", "30 8 * * *", 0, "Asia/Tokyo"},
	} {
		spec, tz, err := Spec(&agentdef.Schedule{Cron: c.cron, Timezone: c.tz})
		if err != nil {
			t.Errorf("%q: %v", c.cron, err)
			continue
		}
		if tz != c.wantTZ || spec.TimeZoneName != c.wantTZ {
			t.Errorf("%q: tz %q / %q, want %q", c.cron, tz, spec.TimeZoneName, c.wantTZ)
		}
		if c.every > 0 {
			if len(spec.Intervals) != 1 || spec.Intervals[0].Every != c.every || len(spec.CronExpressions) != 0 {
				t.Errorf("%q: %+v", c.cron, spec)
			}
		} else if len(spec.CronExpressions) != 1 || spec.CronExpressions[0] != c.wantCron || len(spec.Intervals) != 0 {
			t.Errorf("%q: %+v", c.cron, spec)
		}
	}
	for _, bad := range []agentdef.Schedule{{Cron: "every tuesday"}, {Cron: "* * *"}, {Cron: "@every 500ms"}, {Cron: "* * * * *", Timezone: "Mars/Olympus"}, {}} {
		if _, _, err := Spec(&bad); err == nil {
			t.Errorf("%+v: no error", bad)
		}
	}
}

func TestNextTimes(t *testing.T) {
	from := time.Date(2025, 3, 1, 10, 7, 0, 0, time.UTC)
	got := NextTimes(&agentdef.Schedule{Cron: "*/15 * * * *"}, from, 3)
	want := []time.Time{from.Add(8 * time.Minute), from.Add(23 * time.Minute), from.Add(38 * time.Minute)}
	if len(got) != 3 {
		t.Fatalf("got %v", got)
	}
	for i := range want {
		if !got[i].Equal(want[i]) {
			t.Errorf("%d: %v, want %v", i, got[i], want[i])
		}
	}
	berlin := NextTimes(&agentdef.Schedule{Cron: "0 9 * * *", Timezone: "Europe/Berlin"}, from, 1)
	if len(berlin) != 1 || !berlin[0].Equal(time.Date(2025, 3, 2, 8, 0, 0, 0, time.UTC)) {
		t.Errorf("berlin: %v", berlin)
	}
}

func TestOwns(t *testing.T) {
	m := &Manager{TaskQueue: "agentry"}
	for id, want := range map[string]bool{
		"agentry:schedule:daily":        true,
		"agentry:schedule:":             false,
		"other:schedule:daily":          false,
		"agentry-x:schedule:daily":      false,
		"agentry:schedule:a:schedule:b": false,
	} {
		if m.owns(id) != want {
			t.Errorf("%s: %v", id, !want)
		}
	}
	if m.ScheduleID("daily") != "agentry:schedule:daily" {
		t.Error(m.ScheduleID("daily"))
	}
}
