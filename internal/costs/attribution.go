package costs

import (
	"context"
	"encoding/json"
	"fmt"
	"math"

	"github.com/agentryhq/agentry/models"
)

// AttributionEventType is the event published when today's accounting
// attribution changes while below 100% (and when it is back at 100%).
const AttributionEventType = "costs.attribution"

// Attribution is today's accounting attribution (spec cost rule 13).
type Attribution struct {
	Day          string  `json:"day"`
	Percent      float64 `json:"percent"`
	Calls        int64   `json:"calls"`
	Attributed   int64   `json:"attributed_calls"`
	Unattributed int64   `json:"unattributed_calls"`
	Expired      int64   `json:"expired_calls"`
	Unsettled    int64   `json:"unsettled_calls"`
}

func attributionOf(day string, sum models.LedgerSummary) Attribution {
	settled := sum.Calls - sum.Pending
	a := Attribution{Day: day, Calls: settled, Unattributed: sum.Unattributed, Expired: sum.Expired, Unsettled: sum.Unsettled,
		Attributed: settled - sum.Unattributed, Percent: 100}
	if settled > 0 {
		a.Percent = math.Floor(10000*float64(a.Attributed)/float64(settled)) / 100
	}
	return a
}

// Problem describes attribution below 100%, or "".
func (a Attribution) Problem() string {
	if a.Percent >= 100 {
		return ""
	}
	return fmt.Sprintf("accounting attribution is %.2f%% (below 100%%): %d of %d calls today lack subject, source, provider or model, or were never settled (%d priced at their reserved worst case)",
		a.Percent, a.Unattributed, a.Calls, a.Unsettled)
}

// CheckAttribution is the `costs` health check: an error while today's
// attribution is below 100%. Each change of the figures is logged once (a
// warning while below 100%) and published as a costs.attribution event,
// so operations alerting hears of it without polling.
func (c *Controller) CheckAttribution(ctx context.Context) error {
	day := dayOf(c.now())
	sum, err := c.store.SummarizeLedger(ctx, day.start, day.end)
	if err != nil {
		return err
	}
	a := attributionOf(day.start.Format("2006-01-02"), sum)
	key := fmt.Sprintf("%s:%d:%d", a.Day, a.Attributed, a.Unattributed)
	if prev, _ := c.attributionSeen.Swap(key).(string); prev != key && (a.Percent < 100 || prev != "") {
		if a.Percent < 100 {
			c.log.Warn("cost accounting attribution below 100%", "day", a.Day, "percent", a.Percent,
				"unattributed_calls", a.Unattributed, "calls", a.Calls, "unsettled_calls", a.Unsettled)
		}
		if c.onEvent != nil && (a.Percent < 100 || prev != "") {
			payload, _ := json.Marshal(a)
			c.onEvent(ctx, &models.Event{Type: AttributionEventType, Payload: string(payload), DedupeKey: AttributionEventType + ":" + key})
		}
	}
	if p := a.Problem(); p != "" {
		return fmt.Errorf("%s", p)
	}
	return nil
}
