package temporalconn

import (
	failurepb "go.temporal.io/api/failure/v1"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/temporal"

	"github.com/agentryhq/agentry/internal/scrub"
)

// scrubbingFailures is the failure converter of every client we open: an
// activity's or workflow's error text (which may quote a provider, an MCP
// server or a webhook receiver) has its secrets removed before it is written
// to Temporal history, where it would be kept and shown in the Web UI.
type scrubbingFailures struct {
	converter.FailureConverter
}

func newScrubbingFailures() converter.FailureConverter {
	return scrubbingFailures{temporal.NewDefaultFailureConverter(temporal.DefaultFailureConverterOptions{})}
}

func (c scrubbingFailures) ErrorToFailure(err error) *failurepb.Failure {
	f := c.FailureConverter.ErrorToFailure(err)
	for x := f; x != nil; x = x.GetCause() {
		x.Message = scrub.String(x.GetMessage())
		x.StackTrace = scrub.String(x.GetStackTrace())
	}
	return f
}
