package telemetry

import (
	"sync"

	otelprom "go.opentelemetry.io/otel/exporters/prometheus"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.temporal.io/sdk/client"
	temporalotel "go.temporal.io/sdk/contrib/opentelemetry"
	"go.temporal.io/sdk/interceptor"
)

var (
	temporalMetricsOnce    sync.Once
	temporalMetricsHandler client.MetricsHandler
)

// TemporalMetrics is the Temporal SDK's metrics handler: the SDK's client
// and worker metrics (temporal_request_total, temporal_workflow_task_*,
// temporal_activity_*, ...) recorded through OpenTelemetry and exposed on
// GET /metrics beside the gateway's own. One per process, like the
// registry it feeds.
func TemporalMetrics() client.MetricsHandler {
	temporalMetricsOnce.Do(func() {
		exp, err := otelprom.New(otelprom.WithRegisterer(registry), otelprom.WithoutScopeInfo(), otelprom.WithoutTargetInfo())
		if err != nil {
			temporalMetricsHandler = client.MetricsNopHandler
			return
		}
		mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(exp))
		temporalMetricsHandler = temporalotel.NewMetricsHandler(temporalotel.MetricsHandlerOptions{
			Meter:                mp.Meter("temporal-sdk-go"),
			UseMonotonicCounters: true,
			// A metric the SDK cannot record is not worth a crash.
			OnError: func(error) {},
		})
	})
	return temporalMetricsHandler
}

// TemporalTracing is the SDK's OpenTelemetry interceptor. Set on the
// client it is used by the client (starting a workflow) and by every worker
// made from that client, so one trace runs from the API request through
// the workflow into its activities and their outbound HTTP calls.
func TemporalTracing() (interceptor.Interceptor, error) {
	return temporalotel.NewTracingInterceptor(temporalotel.TracerOptions{})
}
