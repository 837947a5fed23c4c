package gateway

import (
	"context"
	"log/slog"

	"github.com/agentryhq/agentry/internal/lease"
)

// Lease names of the singleton duties: work that must run once across every
// gateway and worker process sharing one database and one Temporal
// namespace (docs/scale.md, "Roles and singleton duties"). Each runs in the
// process holding its lease in singleton_leases; per-process duties (the
// agent-definition watcher, the cost reaper with its in-memory settlement
// retries and limiter, caches, channel connections) run everywhere.
const (
	DutyDeliverySweeper      = "delivery-sweeper"
	DutyScheduleSync         = "schedule-sync"
	DutyEventHooks           = "event-hooks"
	DutyReconcileSchedule    = "reconcile-schedule"
	DutyTaskRunSweeper       = "taskrun-sweeper"
	DutyKnowledgeSweeper     = "knowledge-sweeper"
	DutyPackageInstallResume = "package-install-resume"
)

// SingletonLeaseTTL is how long a singleton duty's lease runs unrenewed: a
// dead holder's duties move to another process within about this long.
var SingletonLeaseTTL = lease.DefaultTTL

func newElector(g *Gateway, log *slog.Logger) *lease.Elector {
	e := &lease.Elector{Store: g.Store, TTL: SingletonLeaseTTL, Log: log}
	if g.Config.Storage.Backend != "postgres" {
		// One process owns a SQLite file: the lease is trivially held, and
		// a restart after a crash takes it back at once instead of after
		// the dead process's TTL.
		e.Holder = "local"
	}
	return e
}

// singleton runs duty under the lease name until ctx ends.
func (s *Services) singleton(ctx context.Context, name string, duty func(context.Context)) {
	s.leases.Go(ctx, name, duty)
}

// HoldsSingleton reports whether this process runs the duty name now (tests, /health details).
func (s *Services) HoldsSingleton(name string) bool { return s.leases.Holds(name) }

// SingletonHolder is this process's holder id in singleton_leases.
func (s *Services) SingletonHolder() string { return s.leases.HolderID() }
