package apiclient

import (
	"context"

	"github.com/agentryhq/agentry/internal/apiclient/openapi"
)

// Builder request and answer types (docs/builder.md).
type (
	BuilderGenerateRequest = openapi.BuilderGenerateRequest
	BuilderRefineRequest   = openapi.BuilderRefineRequest
	BuilderBuildRequest    = openapi.BuilderBuildRequest
	BuilderEvalSuite       = openapi.BuilderEvalSuite
	BuilderEvalCase        = openapi.BuilderEvalCase
	BuilderModel           = openapi.BuilderModel
)

// BuilderDraft is the answer of generate and refine.
type BuilderDraft struct {
	Raw
	openapi.BuilderDraft
}

// BuilderBuildResult is the answer of build.
type BuilderBuildResult struct {
	Raw
	openapi.BuilderBuildResult
}

// BuilderGenerate drafts a definition from a description.
func (c *Client) BuilderGenerate(ctx context.Context, req BuilderGenerateRequest) (*BuilderDraft, error) {
	var d BuilderDraft
	resp, err := c.api.PostBuilderGenerate(ctx, req)
	return &d, c.read(ctx, "POST /builder/generate", resp, err, &d)
}

// BuilderRefine changes a definition as instructed.
func (c *Client) BuilderRefine(ctx context.Context, req BuilderRefineRequest) (*BuilderDraft, error) {
	var d BuilderDraft
	resp, err := c.api.PostBuilderRefine(ctx, req)
	return &d, c.read(ctx, "POST /builder/refine", resp, err, &d)
}

// BuilderBuild validates, runs the suite and saves an agent.
func (c *Client) BuilderBuild(ctx context.Context, req BuilderBuildRequest) (*BuilderBuildResult, error) {
	var r BuilderBuildResult
	resp, err := c.api.PostBuilderBuild(ctx, req)
	return &r, c.read(ctx, "POST /builder/build", resp, err, &r)
}
