package costs

import (
	"context"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/agentryhq/agentry/internal/llm"
	"github.com/agentryhq/agentry/internal/telemetry"
)

// Observed is the controller as the Router's gate with telemetry: a
// "cost admission" span per call, the LLM call, token, cost and rejection
// metrics, and the cost in micro-dollars on the LLM call's span. The
// figures are the ledger's (usage estimated where the provider reported
// none), so metrics and the ledger agree. onReject (may be nil) hears of
// every refused call with the refusal's code, for the audit log.
func (c *Controller) Observed(onReject func(ctx context.Context, call *llm.Call, reason string)) llm.Gate {
	return observedGate{c, onReject}
}

type observedGate struct {
	c        *Controller
	onReject func(ctx context.Context, call *llm.Call, reason string)
}

func (g observedGate) Admit(ctx context.Context, call *llm.Call) (llm.Admission, error) {
	ctx, span := telemetry.Tracer().Start(ctx, "cost admission")
	defer span.End()
	adm, err := g.c.Admit(ctx, call)
	if err != nil {
		reason := "error"
		if r, ok := AsRejection(err); ok {
			reason = r.Code
		}
		span.SetStatus(codes.Error, reason)
		span.SetAttributes(attribute.String("agentry.admission.outcome", "rejected"), attribute.String("agentry.admission.reason", reason))
		telemetry.LLMCallRejected(call.Provider, call.Model, reason)
		if g.onReject != nil {
			g.onReject(ctx, call, reason)
		}
		return nil, err
	}
	span.SetAttributes(attribute.String("agentry.admission.outcome", "admitted"),
		attribute.String("agentry.llm.provider_id", call.Provider), attribute.String("gen_ai.request.model", call.Model))
	a, ok := adm.(*admission)
	if !ok {
		return adm, nil
	}
	return &observedAdmission{admission: a, started: time.Now()}, nil
}

// observedAdmission records the metrics once the ledger has settled the call.
type observedAdmission struct {
	*admission // OnRetry stays visible to the Router
	started    time.Time
}

func (o *observedAdmission) Settle(ctx context.Context, resp *llm.Response, callErr error, attempts int) {
	first := false
	o.once.Do(func() { first = true; o.settle(ctx, resp, callErr, attempts) })
	if !first {
		return
	}
	st := o.settled
	outcome := "ok"
	if callErr != nil {
		outcome = "error"
	}
	telemetry.LLMCallSettled(o.provider, o.model, outcome, st.InputTokens, st.OutputTokens, st.CostMicros, time.Since(o.started))
	trace.SpanFromContext(ctx).SetAttributes(attribute.Int64("agentry.llm.cost_micros", st.CostMicros),
		attribute.Bool("agentry.llm.usage_estimated", st.UsageEstimated))
}
