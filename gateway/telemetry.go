package gateway

import (
	"context"
	"errors"
	"net"
	"net/http"
	"net/http/pprof"
	"time"

	"github.com/agentryhq/agentry/internal/audit"
	"github.com/agentryhq/agentry/internal/costs"
	"github.com/agentryhq/agentry/internal/llm"
	"github.com/agentryhq/agentry/internal/telemetry"
	"github.com/agentryhq/agentry/models"
)

// startTelemetry installs tracing (telemetry.*), opens the audit log
// (runtime.audit_log) and, with telemetry.metrics.listen, starts the
// separate metrics listener. None of them contacts a collector: an
// unreachable OTLP endpoint never fails the start.
func (g *Gateway) startTelemetry(ctx context.Context, version string) error {
	cfg := g.Config
	tracing, err := telemetry.Setup(ctx, cfg.Telemetry, version, g.log)
	if err != nil {
		return err
	}
	g.tracing = tracing
	g.audit, err = audit.Open(cfg.Runtime.AuditLog, cfg.Workspace.LogsDir(), func(err error) {
		telemetry.AuditWriteFailed()
		g.log.Warn("audit log: a line could not be written", "err", err)
	})
	if err != nil {
		return err
	}
	if addr := cfg.Telemetry.Metrics.Listen; addr != "" {
		ln, err := net.Listen("tcp", addr)
		if err != nil {
			return errors.New("telemetry.metrics.listen: " + err.Error())
		}
		mux := http.NewServeMux()
		mux.Handle("GET /metrics", telemetry.Handler())
		if cfg.Telemetry.Metrics.Pprof {
			mux.HandleFunc("/debug/pprof/", pprof.Index)
			mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
			mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
			mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
		}
		g.metricsSrv = &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
		go g.metricsSrv.Serve(ln)
		g.log.Info("metrics listening", "addr", "http://"+ln.Addr().String()+"/metrics")
	}
	return nil
}

// stopTelemetry exports the spans still queued (bounded by ctx) and closes
// the audit log and the metrics listener.
func (g *Gateway) stopTelemetry(ctx context.Context) error {
	var errs []error
	if g.metricsSrv != nil {
		errs = append(errs, g.metricsSrv.Shutdown(ctx))
	}
	if g.tracing != nil {
		flushCtx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		if err := g.tracing.Shutdown(flushCtx); err != nil {
			g.log.Warn("tracing: spans still queued at shutdown were dropped", "err", err)
		}
	}
	errs = append(errs, g.audit.Close())
	return errors.Join(errs...)
}

// auditRejection writes the audit line of a cost admission refusal.
func (g *Gateway) auditRejection(ctx context.Context, call *llm.Call, reason string) {
	if g.audit == nil {
		return
	}
	targets := map[string]string{"call_id": call.Meta.CallID, "provider": call.Provider, "model": call.Model}
	if call.Meta.AgentID != "" {
		targets["agent_id"] = call.Meta.AgentID
	}
	if call.Meta.RunID != "" {
		targets["run_id"] = call.Meta.RunID
	}
	g.audit.Write(audit.Entry{Kind: audit.KindDecision, Subject: call.Meta.Subject, Route: "llm admission (" + call.Meta.Source + ")",
		Targets: targets, Outcome: "rejected", Reason: reason, TraceID: telemetry.TraceID(ctx)})
}

// observeState feeds the gauges read at scrape time and counts task runs
// from the event stream (run.started, run.finished, run.failed,
// run.cancelled), which also carries the runs of workers in other
// processes.
func (s *Services) observeState(bg context.Context) {
	st := s.gw.Store
	telemetry.SetSources(telemetry.Sources{
		RunsActive: st.CountActiveRuns,
		BudgetsRemaining: func(ctx context.Context) (map[string]float64, error) {
			status, err := s.Costs.Status(ctx)
			if err != nil {
				return nil, err
			}
			out := map[string]float64{}
			if r := status.Periods.Day.RemainingUSD; r != nil {
				out["day"] = *r
			}
			if r := status.Periods.Month.RemainingUSD; r != nil {
				out["month"] = *r
			}
			return out, nil
		},
		Breakers: func(ctx context.Context) (map[string]string, error) {
			status, err := s.Costs.Status(ctx)
			if err != nil {
				return nil, err
			}
			return breakerStates(status.Breakers), nil
		},
	})
	evs, err := s.Events.Subscribe(bg, models.EventFilter{TypePrefixes: []string{"run."}}, -1)
	if err != nil {
		s.log.Warn("metrics: cannot follow run events; agentry_runs_total stays 0", "err", err)
		return
	}
	go func() {
		for ev := range evs {
			switch ev.Type {
			case models.EventRunStarted:
				telemetry.RunStatus("started")
			case models.EventRunFinished:
				telemetry.RunStatus("finished")
			case models.EventRunFailed:
				telemetry.RunStatus("failed")
			case models.EventRunCancelled:
				telemetry.RunStatus("cancelled")
			}
		}
	}()
}

func breakerStates(bs []costs.BreakerStatus) map[string]string {
	out := make(map[string]string, len(bs))
	for _, b := range bs {
		out[b.Provider] = b.State
	}
	return out
}
