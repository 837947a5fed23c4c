package config

import "strings"

// Roles, most privileged first.
var Roles = []string{"admin", "operator", "member", "viewer"}

// SplitPricingKey splits "provider/model" (the model may itself contain "/").
func SplitPricingKey(key string) (provider, model string, ok bool) {
	provider, model, ok = strings.Cut(key, "/")
	return provider, model, ok && provider != "" && model != ""
}
