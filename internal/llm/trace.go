package llm

import (
	"context"
	"errors"
	"strconv"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/agentryhq/agentry/internal/telemetry"
)

// Span attributes of an LLM call: the OpenTelemetry GenAI semantic
// conventions plus the gateway's own (docs/observability.md). Prompt and
// reply text are recorded only with telemetry.capture_content.
const (
	attrOperation    = "gen_ai.operation.name"
	attrProvider     = "gen_ai.provider.name"
	attrRequestModel = "gen_ai.request.model"
	attrMaxTokens    = "gen_ai.request.max_tokens"
	attrInputTokens  = "gen_ai.usage.input_tokens"
	attrOutputTokens = "gen_ai.usage.output_tokens"
	attrRespModel    = "gen_ai.response.model"
	attrRespID       = "gen_ai.response.id"
	attrFinish       = "gen_ai.response.finish_reasons"
	attrCallID       = "agentry.llm.call_id"
	attrProviderID   = "agentry.llm.provider_id"
	attrSource       = "agentry.llm.source"
	attrAgent        = "agentry.agent.id"
	attrRun          = "agentry.run.id"
	attrAttempts     = "agentry.llm.attempts"
	attrInput        = "gen_ai.input.messages"
	attrOutput       = "gen_ai.output.messages"
)

// kinded is a provider that knows its wire format (openai, anthropic, ollama).
type kinded interface{ Kind() string }

// providerName is the GenAI provider name: the wire format of the provider
// behind id (its config id when the format is unknown).
func providerName(p Provider, id string) string {
	for p != nil {
		if k, ok := p.(kinded); ok {
			return k.Kind()
		}
		u, ok := p.(interface{ Unwrap() Provider })
		if !ok {
			break
		}
		p = u.Unwrap()
	}
	return id
}

// clientSpan is made once (each call of trace.WithSpanKind allocates).
var clientSpan = trace.WithSpanKind(trace.SpanKindClient)

// startCallSpan opens the span of one inference; the admission span, the
// provider's HTTP spans and the settlement happen inside it.
func startCallSpan(ctx context.Context, call *Call) (context.Context, trace.Span) {
	ctx, span := telemetry.Tracer().Start(ctx, "chat "+call.Model, clientSpan)
	if !span.IsRecording() {
		return ctx, span
	}
	span.SetAttributes(
		attribute.String(attrOperation, "chat"),
		attribute.String(attrRequestModel, call.Model),
		attribute.String(attrProviderID, call.Provider),
		attribute.String(attrCallID, call.Meta.CallID),
		attribute.String(attrSource, call.Meta.Source),
	)
	if call.Meta.AgentID != "" {
		span.SetAttributes(attribute.String(attrAgent, call.Meta.AgentID))
	}
	if call.Meta.RunID != "" {
		span.SetAttributes(attribute.String(attrRun, call.Meta.RunID))
	}
	if call.Request.MaxTokens > 0 {
		span.SetAttributes(attribute.Int(attrMaxTokens, call.Request.MaxTokens))
	}
	if telemetry.CaptureContent() {
		var text []string
		for _, m := range call.Request.Messages {
			text = append(text, m.Role+": "+m.Content)
		}
		span.SetAttributes(attribute.StringSlice(attrInput, text))
	}
	return ctx, span
}

// endCallSpan records the outcome: provider (after admission may have
// rerouted), usage as the provider reported it, finish reason, error.
func endCallSpan(span trace.Span, call *Call, p Provider, resp *Response, err error) {
	if span.IsRecording() {
		span.SetAttributes(attribute.String(attrProvider, providerName(p, call.Provider)),
			attribute.String(attrProviderID, call.Provider), attribute.String(attrRequestModel, call.Model))
		if resp != nil {
			span.SetAttributes(
				attribute.Int64(attrInputTokens, resp.Usage.InputTokens),
				attribute.Int64(attrOutputTokens, resp.Usage.OutputTokens),
				attribute.Int(attrAttempts, max(resp.Attempts, 1)),
			)
			if resp.Model != "" {
				span.SetAttributes(attribute.String(attrRespModel, resp.Model))
			}
			if resp.RequestID != "" {
				span.SetAttributes(attribute.String(attrRespID, resp.RequestID))
			}
			if resp.FinishReason != "" {
				span.SetAttributes(attribute.StringSlice(attrFinish, []string{resp.FinishReason}))
			}
			if telemetry.CaptureContent() {
				span.SetAttributes(attribute.StringSlice(attrOutput, []string{resp.Content}))
			}
		}
		if err != nil {
			span.SetStatus(codes.Error, errorKind(err))
			span.SetAttributes(attribute.String("error.type", errorKind(err)))
		}
	}
	span.End()
}

// errorKind names an error without its text (provider error bodies may
// quote the prompt): the HTTP status, the provider's error type, or a
// cancellation.
func errorKind(err error) string {
	var pe *ProviderError
	switch {
	case errors.As(err, &pe) && pe.StatusCode > 0:
		return "http_" + strconv.Itoa(pe.StatusCode)
	case errors.As(err, &pe) && pe.Type != "":
		return pe.Type
	case errors.Is(err, context.Canceled):
		return "canceled"
	case errors.Is(err, context.DeadlineExceeded):
		return "timeout"
	case errors.As(err, &pe):
		return "provider_unreachable"
	}
	return "error"
}
