package telemetry

import (
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
)

// TestRecordedSeriesAreTheVectorsOwn: the series looked up once and kept
// are the ones GET /metrics reports, for every label combination.
func TestRecordedSeriesAreTheVectorsOwn(t *testing.T) {
	req := func(status string) float64 {
		return testutil.ToFloat64(httpRequests.WithLabelValues("/api/v1/test-series", "POST", status))
	}
	calls := func(outcome string) float64 {
		return testutil.ToFloat64(llmCalls.WithLabelValues("series-p", "series-m", outcome))
	}
	tokens := func(kind string) float64 {
		return testutil.ToFloat64(llmTokens.WithLabelValues("series-p", "series-m", kind))
	}
	ok0, bad0, okCalls0, errCalls0, in0, out0 := req("200"), req("500"), calls("ok"), calls("error"), tokens("input"), tokens("output")
	for range 3 {
		ObserveHTTP("/api/v1/test-series", "POST", 200, time.Millisecond)
		LLMCallSettled("series-p", "series-m", "ok", 10, 4, 25, time.Millisecond)
	}
	ObserveHTTP("/api/v1/test-series", "POST", 500, time.Millisecond)
	LLMCallSettled("series-p", "series-m", "error", 1, 0, 0, time.Millisecond)
	if d := req("200") - ok0; d != 3 {
		t.Errorf("200s counted %v times, want 3", d)
	}
	if d := req("500") - bad0; d != 1 {
		t.Errorf("500s counted %v times, want 1", d)
	}
	if d := calls("ok") - okCalls0; d != 3 {
		t.Errorf("ok calls counted %v times, want 3", d)
	}
	if d := calls("error") - errCalls0; d != 1 {
		t.Errorf("failed calls counted %v times, want 1", d)
	}
	if d := tokens("input") - in0; d != 31 {
		t.Errorf("input tokens %v, want 31", d)
	}
	if d := tokens("output") - out0; d != 12 {
		t.Errorf("output tokens %v, want 12", d)
	}
}
