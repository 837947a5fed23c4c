package e2e

import (
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentryhq/agentry/dev/gatewaytest"
	"github.com/agentryhq/agentry/dev/gitrepo"
)

// BenchmarkPackageInstallJob measures package install jobs through the
// API of an in-process gateway (embedded Temporal, SQLite) from local bare
// git repositories holding raw agent source (no build script): the time
// from POST /package-installs to the job read back as succeeded, how much
// of it the steps themselves take (fetch, verify, install: from the job's
// progress timestamps) and how much is the workflow around them (Temporal
// scheduling the four activities and the row updates between them), and
// jobs per second with 8 jobs in flight.
//
//	go test -run '^$' -bench PackageInstallJob -benchtime 40x ./e2e/
func BenchmarkPackageInstallJob(b *testing.B) {
	g := gatewaytest.Start(b, gatewaytest.Options{})
	const inFlight = 8
	repos := make([]string, inFlight)
	for i := range repos {
		repos[i] = gitrepo.Bare(b, map[string]string{
			"agent.yaml":         fmt.Sprintf("id: bench%d\ndescription: Package install benchmark\n", i),
			"prompts/system.md":  "You sort tickets.\n",
			"evals/cases.yaml":   "- input: hello\n",
			"samples/ticket.txt": strings.Repeat("a ticket line\n", 200),
		})
	}
	n := max(b.N, 20)
	b.ResetTimer()
	var total, steps, workflow []time.Duration
	for i := 0; i < n; i++ {
		start := time.Now()
		job := installJob(b, g, repos[0])
		total = append(total, time.Since(start))
		s, w := jobTimes(b, job)
		steps, workflow = append(steps, s), append(workflow, w)
	}
	start := time.Now()
	var wg sync.WaitGroup
	for w := 0; w < inFlight; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := w; i < n; i += inFlight {
				installJob(b, g, repos[w])
			}
		}()
	}
	wg.Wait()
	rate := float64(n) / time.Since(start).Seconds()
	b.StopTimer()
	b.ReportMetric(float64(median(total).Milliseconds()), "job-p50-ms")
	b.ReportMetric(float64(median(steps).Milliseconds()), "steps-p50-ms")
	b.ReportMetric(float64(median(workflow).Milliseconds()), "workflow-p50-ms")
	b.ReportMetric(rate, "jobs/s@8")
}

// benchJob is what the benchmark reads of a job.
type benchJob struct {
	Status, Error string
	Progress      []struct {
		At      time.Time
		Step    string
		Message string
	}
}

// installJob starts a job and polls it (every 5 ms) until it ends; a
// failed job fails the benchmark. Goroutine-safe (Errorf, not Fatal).
func installJob(b *testing.B, g *gatewaytest.Gateway, repo string) benchJob {
	r := g.Do("POST", "/api/v1/package-installs", map[string]any{"source": repo, "allow_unverified": true, "overwrite": true})
	id, _ := r.JSON["id"].(string)
	if r.Status != 202 || id == "" {
		b.Errorf("start: %d %s", r.Status, r.Raw)
		return benchJob{}
	}
	for deadline := time.Now().Add(time.Minute); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
		r = g.Do("GET", "/api/v1/package-installs/"+id, nil)
		var job benchJob
		if err := json.Unmarshal(r.Raw, &job); err != nil {
			b.Errorf("job %s: %v", id, err)
			return job
		}
		switch job.Status {
		case "succeeded":
			return job
		case "failed":
			b.Errorf("job %s failed: %s", id, job.Error)
			return job
		}
	}
	b.Errorf("job %s did not end within a minute", id)
	return benchJob{}
}

// jobTimes splits a finished job's time (first to last progress line)
// into the steps' own time (each step from its first to its last line)
// and the rest, the workflow between them.
func jobTimes(b *testing.B, job benchJob) (steps, workflow time.Duration) {
	p := job.Progress
	if len(p) < 2 {
		b.Fatalf("job without progress: %+v", job)
	}
	first, last := map[string]time.Time{}, map[string]time.Time{}
	for _, line := range p {
		if line.Step == "queued" {
			continue
		}
		if _, ok := first[line.Step]; !ok {
			first[line.Step] = line.At
		}
		last[line.Step] = line.At
	}
	for step := range first {
		steps += last[step].Sub(first[step])
	}
	return steps, p[len(p)-1].At.Sub(p[0].At) - steps
}

func median(d []time.Duration) time.Duration {
	s := append([]time.Duration(nil), d...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	return s[len(s)/2]
}
