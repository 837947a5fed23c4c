package gateway

import (
	"testing"
	"time"

	"github.com/agentryhq/agentry/dev/testenv"
)

// defaultDuties are the singleton duties a default configuration starts
// (event hooks and knowledge bases need configuring).
var defaultDuties = []string{DutyDeliverySweeper, DutyScheduleSync, DutyReconcileSchedule, DutyTaskRunSweeper, DutyPackageInstallResume}

func holders(sets []*Services, duty string) (n int, who int) {
	for i, s := range sets {
		if s.HoldsSingleton(duty) {
			n, who = n+1, i
		}
	}
	return n, who
}

// Two processes' service sets against one PostgreSQL run each singleton duty
// once: exactly one of them holds each lease. When the holder stops (its
// leases released) the other takes every duty over.
func TestSingletonDutiesRunOnceAcrossTwoServiceSets(t *testing.T) {
	dsn := testenv.Postgres(t)
	if dsn == "" {
		t.Skip("PostgreSQL not available")
	}
	old := SingletonLeaseTTL
	SingletonLeaseTTL = 900 * time.Millisecond
	t.Cleanup(func() { SingletonLeaseTTL = old })
	env := map[string]string{"AGENTRY_STORAGE_BACKEND": "postgres", "AGENTRY_STORAGE_DSN": dsn}
	sets := []*Services{testServicesEnv(t, env), testServicesEnv(t, env)}

	deadline := time.Now().Add(10 * time.Second)
	for _, duty := range defaultDuties {
		for {
			if n, _ := holders(sets, duty); n == 1 {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("duty %s: no holder", duty)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	// Renewals go on; nobody takes over a live holder.
	for i := 0; i < 30; i++ {
		for _, duty := range defaultDuties {
			if n, _ := holders(sets, duty); n > 1 {
				t.Fatalf("duty %s held by %d processes at once", duty, n)
			}
		}
		time.Sleep(50 * time.Millisecond)
	}

	sets[0].Stop()
	for _, duty := range defaultDuties {
		for !sets[1].HoldsSingleton(duty) {
			if time.Now().After(deadline.Add(10 * time.Second)) {
				t.Fatalf("duty %s not taken over after the first process stopped", duty)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
}

// On SQLite one process owns the file and holds every lease at once; a
// restart on the same file (after a crash that released nothing) takes them
// back at once rather than after the dead process's TTL.
func TestSingletonDutiesOnSQLiteAreHeldAtOnce(t *testing.T) {
	s := testServices(t)
	deadline := time.Now().Add(5 * time.Second)
	for _, duty := range defaultDuties {
		for !s.HoldsSingleton(duty) {
			if time.Now().After(deadline) {
				t.Fatalf("duty %s not held on SQLite", duty)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	if s.SingletonHolder() != "local" {
		t.Fatalf("SQLite holder = %q, want the stable id local", s.SingletonHolder())
	}
}
