package probe

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/agentryhq/agentry/dev/fakellm"
)

// ssrfCheck is one SSRF form asked of the http_get tool through a
// scripted tool call.
type ssrfCheck struct {
	cue, callID, url string
}

// scriptSSRF makes the fake answer "SSRFPROBE n" with an http_get call of
// the n-th SSRF form.
func scriptSSRF(fake *fakellm.Server) []ssrfCheck {
	var checks []ssrfCheck
	var rules []fakellm.Rule
	for i, u := range ssrfForms {
		ch := ssrfCheck{cue: fmt.Sprintf("SSRFPROBE %d.", i), callID: fmt.Sprintf("call_ssrf_%d", i), url: u}
		checks = append(checks, ch)
		tc := fakellm.NewToolCall("http_get", map[string]string{"url": u})
		tc.ID = ch.callID
		rules = append(rules, fakellm.Rule{Contains: ch.cue, Times: 1, ToolCalls: []fakellm.ToolCall{tc}})
	}
	fake.AddRules(rules...)
	return checks
}

// checkHTTPGetSSRF chats each cue and reads the tool result the gateway
// sent back to the provider: it must say the destination was refused.
func checkHTTPGetSSRF(c *client, fake *fakellm.Server, checks []ssrfCheck, rep *BadInput) (checked, fetched int) {
	for _, ch := range checks {
		a := c.call("POST", "/api/v1/chat", map[string]any{"agent_id": "probe", "text": ch.cue})
		if a.Status != 200 {
			rep.Examples = append(rep.Examples, fmt.Sprintf("http_get SSRF chat %s: %d %.200s", ch.url, a.Status, a.Raw))
			continue
		}
		result, found := toolResult(fake, ch.callID)
		if !found {
			rep.Examples = append(rep.Examples, fmt.Sprintf("http_get SSRF %s: no tool result reached the provider", ch.url))
			continue
		}
		checked++
		if !strings.Contains(result, "not allowed") {
			fetched++
			rep.Examples = append(rep.Examples, fmt.Sprintf("http_get fetched SSRF form %s: %.200s", ch.url, result))
		}
	}
	return checked, fetched
}

// toolResult finds the content of the tool message answering callID in
// the requests the provider received.
func toolResult(fake *fakellm.Server, callID string) (string, bool) {
	for _, call := range fake.Calls() {
		var body struct {
			Messages []struct {
				Role       string `json:"role"`
				ToolCallID string `json:"tool_call_id"`
				Content    any    `json:"content"`
			} `json:"messages"`
		}
		if json.Unmarshal(call.Body, &body) != nil {
			continue
		}
		for _, m := range body.Messages {
			if m.Role == "tool" && m.ToolCallID == callID {
				return fmt.Sprint(m.Content), true
			}
		}
	}
	return "", false
}
