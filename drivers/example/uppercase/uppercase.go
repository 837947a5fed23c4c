// Package uppercase is the example driver of flavored builds: built in
// with `agentryd build --with github.com/agentryhq/agentry/drivers/example/uppercase`,
// it gives agents the tool "uppercase" (list it in an agent's builtins).
package uppercase

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/agentryhq/agentry/drivers"
)

func init() {
	drivers.Register(drivers.Driver{
		Name:    "github.com/agentryhq/agentry/drivers/example/uppercase",
		Version: "1.0.0",
		Tools: []drivers.Tool{{
			Name:        "uppercase",
			Description: "Return the text in upper case.",
			Parameters:  json.RawMessage(`{"type":"object","properties":{"text":{"type":"string"}},"required":["text"]}`),
			Run:         run,
		}},
	})
}

func run(_ context.Context, args json.RawMessage) (string, error) {
	var in struct {
		Text *string `json:"text"`
	}
	if err := json.Unmarshal(args, &in); err != nil || in.Text == nil {
		return "", fmt.Errorf(`arguments must be {"text": "..."}`)
	}
	return strings.ToUpper(*in.Text), nil
}
