package telemetry

import (
	"context"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Sources are the readings behind the gauges that describe state rather
// than count events; they are read at scrape time. The composition root
// sets them (SetSources) from the store and the cost controller.
type Sources struct {
	// RunsActive counts queued and running task runs.
	RunsActive func(ctx context.Context) (int64, error)
	// BudgetsRemaining is the USD left per period (day, month) that has a
	// budget.
	BudgetsRemaining func(ctx context.Context) (map[string]float64, error)
	// Breakers is each used provider's circuit state: closed, half_open or open.
	Breakers func(ctx context.Context) (map[string]string, error)
}

// scrapeTimeout bounds the readings of one scrape.
const scrapeTimeout = 3 * time.Second

var (
	sourcesMu sync.RWMutex
	sources   Sources
)

// SetSources installs the gauge readings (the last gateway started wins).
func SetSources(s Sources) {
	sourcesMu.Lock()
	defer sourcesMu.Unlock()
	sources = s
}

var (
	descRunsActive = prometheus.NewDesc("agentry_runs_active", "Task runs queued or running now.", nil, nil)
	descBudget     = prometheus.NewDesc("agentry_budget_remaining_usd",
		"Workspace budget left in the current period (budget - spend - reserved), for periods with a budget.", []string{"period"}, nil)
	descBreaker = prometheus.NewDesc("agentry_breaker_state",
		"Circuit breaker state per provider id: 0 closed, 1 half-open (next call probes), 2 open.", []string{"provider"}, nil)
)

// breakerValue maps a breaker state to the gauge value.
var breakerValue = map[string]float64{"closed": 0, "half_open": 1, "open": 2}

type stateCollector struct{}

func (stateCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- descRunsActive
	ch <- descBudget
	ch <- descBreaker
}

func (stateCollector) Collect(ch chan<- prometheus.Metric) {
	sourcesMu.RLock()
	s := sources
	sourcesMu.RUnlock()
	ctx, cancel := context.WithTimeout(context.Background(), scrapeTimeout)
	defer cancel()
	if s.RunsActive != nil {
		if n, err := s.RunsActive(ctx); err == nil {
			ch <- prometheus.MustNewConstMetric(descRunsActive, prometheus.GaugeValue, float64(n))
		}
	}
	if s.BudgetsRemaining != nil {
		if m, err := s.BudgetsRemaining(ctx); err == nil {
			for period, usd := range m {
				ch <- prometheus.MustNewConstMetric(descBudget, prometheus.GaugeValue, usd, period)
			}
		}
	}
	if s.Breakers != nil {
		if m, err := s.Breakers(ctx); err == nil {
			for provider, state := range m {
				if v, ok := breakerValue[state]; ok {
					ch <- prometheus.MustNewConstMetric(descBreaker, prometheus.GaugeValue, v, provider)
				}
			}
		}
	}
}

func init() { registry.MustRegister(stateCollector{}) }
