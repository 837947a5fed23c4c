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
	for _, c := range []struct {
		what      string
		got, want float64
	}{
		{"200s", req("200") - ok0, 3}, {"500s", req("500") - bad0, 1},
		{"ok calls", calls("ok") - okCalls0, 3}, {"failed calls", calls("error") - errCalls0, 1},
		{"input tokens", tokens("input") - in0, 31}, {"output tokens", tokens("output") - out0, 12},
	} {
		if c.got != c.want {
			t.Errorf("%s: %v, want %v", c.what, c.got, c.want)
		}
	}
}
