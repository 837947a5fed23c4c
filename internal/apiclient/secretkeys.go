package apiclient

import (
	"context"

	"github.com/agentryhq/agentry/internal/apiclient/openapi"
)

// SecretRotation is POST /secrets/rotate.
type SecretRotation struct {
	Raw
	openapi.SecretRotation
}

// RotateSecrets re-wraps the secret store's data keys with the credentials
// provider's current key version.
func (c *Client) RotateSecrets(ctx context.Context) (*SecretRotation, error) {
	var r SecretRotation
	resp, err := c.api.PostSecretsRotate(ctx)
	return &r, c.read(ctx, "POST /secrets/rotate", resp, err, &r)
}
