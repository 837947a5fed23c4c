package browser

import (
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/agentryhq/agentry/dev/fakellm"
	"github.com/agentryhq/agentry/dev/gatewaytest"
	"github.com/agentryhq/agentry/dev/testenv"
)

const builderDraft = "```yaml\nid: greeter\nname: Greeter\ndescription: Greets visitors\nsystem_prompt: Greet the visitor warmly.\nllm: {provider: openai, model: gpt-4o-mini}\n```\n"

// The Builder page (issue 50): describe an agent, see the draft, refine it
// and see the diff, try it in the chat pane before it exists, save it
// enabled; the saved agent answers in chat.
func TestConsoleBuilder(t *testing.T) {
	chrome := testenv.Chromium(t)
	g := gatewaytest.Start(t, gatewaytest.Options{Config: "llm:\n  default_provider: openai\n  studio: {max_build_tokens: 20000}\n"})
	g.Fake.Script(
		fakellm.Rule{Contains: "greets visitors", Reply: builderDraft},
		fakellm.Rule{Contains: "in French", Reply: strings.Replace(builderDraft, "warmly.", "warmly, in French.", 1)},
	)
	s := newSession(t, chrome, g.URL())
	s.do(t, 30*time.Second, "sign in and open the builder",
		chromedp.Navigate(g.URL()+"/#/builder"), chromedp.WaitVisible("#credential"),
		chromedp.SendKeys("#credential", gatewaytest.TestAPIKey), chromedp.Click("#signin-form button"),
		chromedp.WaitVisible("#builder-description"))
	s.do(t, 30*time.Second, "generate a draft",
		chromedp.SendKeys("#builder-description", "an agent that greets visitors"), chromedp.Click("#builder-generate button"),
		chromedp.WaitVisible("#builder-draft"))
	s.waitFor(t, 10*time.Second, "the draft", `document.querySelector("#builder-definition").value.startsWith("id: greeter")`)
	s.waitFor(t, 10*time.Second, "the spent line", `document.querySelector("#builder-spent").textContent.includes("1 call(s)")`)
	s.do(t, 30*time.Second, "refine it",
		chromedp.SendKeys("#builder-instruction", "answer in French"), chromedp.Click("#builder-refine button"))
	s.waitFor(t, 20*time.Second, "the diff", `document.querySelector("#builder-diff").textContent.includes("+system_prompt: Greet the visitor warmly, in French.")`)
	s.do(t, 30*time.Second, "try the draft",
		chromedp.SendKeys("#builder-try-text", "good morning"), chromedp.Click("#builder-try button"),
		chromedp.WaitVisible("#builder-try-log .msg.agent"))
	if got := s.text(t, "#builder-try-log .msg.agent"); got != "echo: good morning" {
		t.Fatalf("the draft answered %q", got)
	}
	if r := g.Do("GET", "/api/v1/agents/greeter", nil); r.Status != 404 {
		t.Fatalf("trying saved the draft: %d", r.Status)
	}
	s.screenshot(t, "builder")
	s.do(t, 30*time.Second, "save it enabled",
		chromedp.Click("#builder-enabled"), chromedp.Click("#builder-save button"))
	s.waitFor(t, 20*time.Second, "saved", `document.querySelector("#builder-save").dataset.saved === "greeter"`)
	c := g.Do("POST", "/api/v1/chat", map[string]any{"agent_id": "greeter", "text": "bonjour"})
	if c.Status != 200 || c.JSON["reply"] != "echo: bonjour" {
		t.Fatalf("chat with the saved agent: %d %s", c.Status, c.Raw)
	}
}
