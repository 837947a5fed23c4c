package schedules

import (
	"fmt"
	"strings"
	"time"

	"github.com/agentryhq/agentry/internal/agentdef"
	"go.temporal.io/sdk/client"
)

// DefaultTimezone is the zone of a schedule without schedule.timezone.
const DefaultTimezone = "UTC"

// descriptors maps the cron descriptors agentdef.ParseCron accepts to the
// five-field form Temporal reads (it knows only some of them by name).
var descriptors = map[string]string{
	"@yearly":   "0 0 1 1 *",
	"@annually": "0 0 1 1 *",
	"@monthly":  "0 0 1 * *",
	"@weekly":   "0 0 * * 0",
	"@daily":    "0 0 * * *",
	"@midnight": "0 0 * * *",
	"@hourly":   "0 * * * *",
}

// Spec turns an agent's schedule (cron expression, optional timezone) into
// a Temporal ScheduleSpec:
//
//   - five fields (minute hour day-of-month month day-of-week) and the
//     descriptors @hourly, @daily/@midnight, @weekly, @monthly,
//     @yearly/@annually become a cron expression;
//   - "@every <duration>" (Go syntax: 2s, 90s, 1h30m) becomes an interval;
//   - a CRON_TZ=<zone> or TZ=<zone> prefix, else schedule.timezone, else
//     UTC is the time zone.
//
// The expression was validated with agentdef.ParseCron when the definition
// was loaded; it is checked again here.
func Spec(s *agentdef.Schedule) (client.ScheduleSpec, string, error) {
	var spec client.ScheduleSpec
	if s == nil || strings.TrimSpace(s.Cron) == "" {
		return spec, "", fmt.Errorf("schedule.cron is empty")
	}
	expr := strings.TrimSpace(s.Cron)
	if _, err := agentdef.ParseCron(expr); err != nil {
		return spec, "", fmt.Errorf("schedule.cron %q does not parse: %w", expr, err)
	}
	tz := strings.TrimSpace(s.Timezone)
	for _, p := range []string{"CRON_TZ=", "TZ="} {
		if rest, ok := strings.CutPrefix(expr, p); ok {
			zone, tail, _ := strings.Cut(rest, " ")
			tz, expr = zone, strings.TrimSpace(tail)
		}
	}
	if tz == "" {
		tz = DefaultTimezone
	}
	if _, err := time.LoadLocation(tz); err != nil {
		return spec, "", fmt.Errorf("schedule.timezone: unknown time zone %q", tz)
	}
	spec.TimeZoneName = tz
	switch {
	case strings.HasPrefix(expr, "@every "):
		d, err := time.ParseDuration(strings.TrimSpace(strings.TrimPrefix(expr, "@every ")))
		if err != nil || d < time.Second {
			return spec, "", fmt.Errorf("schedule.cron %q: @every needs a duration of at least 1s", expr)
		}
		spec.Intervals = []client.ScheduleIntervalSpec{{Every: d}}
	case strings.HasPrefix(expr, "@"):
		five, ok := descriptors[expr]
		if !ok {
			return spec, "", fmt.Errorf("schedule.cron %q: unknown descriptor", expr)
		}
		spec.CronExpressions = []string{five}
	default:
		spec.CronExpressions = []string{expr}
	}
	return spec, tz, nil
}

// NextTimes computes the next n fire times locally (for a schedule that
// Temporal does not have yet).
func NextTimes(s *agentdef.Schedule, from time.Time, n int) []time.Time {
	_, tz, err := Spec(s)
	if err != nil {
		return nil
	}
	expr := strings.TrimSpace(s.Cron)
	if !strings.HasPrefix(expr, "CRON_TZ=") && !strings.HasPrefix(expr, "TZ=") && !strings.HasPrefix(expr, "@every") {
		expr = "CRON_TZ=" + tz + " " + expr
	}
	sched, err := agentdef.ParseCron(expr)
	if err != nil {
		return nil
	}
	out := make([]time.Time, 0, n)
	t := from
	for range n {
		t = sched.Next(t)
		if t.IsZero() {
			break
		}
		out = append(out, t.UTC())
	}
	return out
}
