package probe

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"syscall"
	"time"

	"github.com/agentryhq/agentry/dev/fakellm"
	"github.com/agentryhq/agentry/dev/gatewaytest"
)

// Models the fake provider sees: the crash work uses its own model, so the
// provider's calls for it can be told from the rest and matched against the
// gateway's ledger.
const (
	modelPlain = "gpt-4o-mini"
	modelCrash = "gpt-4o"
)

// Agents of the probe's workspace. probe serves chat, task runs and the
// http_get SSRF check; claude uses the Anthropic-format provider (its key
// travels as x-api-key); hook answers webhooks; crash and crashhook do the
// work that is killed.
var agentFiles = map[string]string{
	"probe.yaml":     "id: probe\nllm: {provider: fake, model: " + modelPlain + "}\nbuiltins: [http_get]\nmax_turns: 3\n",
	"claude.yaml":    "id: claude\nllm: {provider: claude, model: claude-3-5-haiku}\nmax_turns: 2\n",
	"hook.yaml":      "id: hook\ntrigger: webhook\nllm: {provider: fake, model: " + modelPlain + "}\n",
	"crash.yaml":     "id: crash\nllm: {provider: fake, model: " + modelCrash + "}\nmax_turns: 2\n",
	"hanghook.yaml":  "id: hanghook\ntrigger: webhook\nllm: {provider: fake, model: " + modelPlain + "}\nwebhook: {text_path: text, thread_id_path: thread}\n",
	"crashhook.yaml": "id: crashhook\ntrigger: webhook\nllm: {provider: fake, model: " + modelCrash + "}\n",
}

// gatewayProc is the agentryd binary on its own workspace, HOME and free
// ports, restarted on the same workspace after each kill.
type gatewayProc struct {
	bin, home, ws string
	env           map[string]string
	base          string
	temporalAddr  string
	proc          *gatewaytest.Process
	// earlier holds the output of processes that ended (searched for
	// secrets like the current one's).
	earlier []string
}

// newGatewayProc writes the workspace: config.yaml with a secret planted
// in every place the gateway knows one, and the agents.
func newGatewayProc(bin, dir string, fake *fakellm.Server, sink *gatewaytest.HookSink, s planted) (*gatewayProc, error) {
	ws, home := filepath.Join(dir, "workspace"), filepath.Join(dir, "home")
	for _, d := range []string{filepath.Join(ws, "agents"), home} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return nil, err
		}
	}
	for name, body := range agentFiles {
		if err := os.WriteFile(filepath.Join(ws, "agents", name), []byte(body), 0o644); err != nil {
			return nil, err
		}
	}
	// allowed_hosts lets deliveries reach the local sink on 127.0.0.1 while
	// loopback and link-local stay refused for every other spelling (the
	// SSRF forms are literal IPv6 addresses embedding an IPv4 one).
	config := fmt.Sprintf(`
server: {api_key: %q}
log: {file: gateway.log}
auth:
  keys: [{subject: probe-viewer, key: %q, role: viewer}]
  jwt: {secret: %q}
llm:
  default_provider: fake
  providers:
    fake: {type: openai, base_url: %q, api_key_env: PROBE_PROVIDER_KEY, default_model: %s, models: [%s, %s], max_retries: 0}
    claude: {type: anthropic, base_url: %q, api_key: %q, default_model: claude-3-5-haiku, max_retries: 0}
costs: {unknown_pricing: allow}
runtime:
  ssrf: {enabled: true, allowed_hosts: [127.0.0.1]}
  delivery: {initial_interval: 200ms, max_interval: 1s, retry_for: 30s, attempt_timeout: 5s}
channels:
  webhook: {enabled: true, url: %q, secret: %q, headers: "Authorization: Bearer %s"}
hooks:
  - on: ["run.*"]
    url: %q
    secret_env: PROBE_HOOK_SECRET
mcp:
  probe-mcp: {url: %q, headers: {X-Api-Key: %q}}
`, s.AdminKey, s.ViewerKey, s.JWTSecret, fake.OpenAIBaseURL(), modelPlain, modelPlain, modelCrash,
		fake.URL(), s.AnthropicKey, sink.URL, s.ChannelSecret, s.ChannelHeader, sink.URL, sink.URL+"/mcp", s.MCPHeader)
	if err := os.WriteFile(filepath.Join(ws, "config.yaml"), []byte(config), 0o600); err != nil {
		return nil, err
	}
	ports, err := gatewaytest.PickFreePorts(2)
	if err != nil {
		return nil, err
	}
	for _, p := range ports {
		if p == 18789 || p == 7233 || p == 8233 { // the defaults others run on
			return nil, fmt.Errorf("free port %d is a default port; run again", p)
		}
	}
	return &gatewayProc{
		bin: bin, home: home, ws: ws,
		env: map[string]string{
			"AGENTRY_WORKSPACE":                       ws,
			"AGENTRY_SERVER_PORT":                     strconv.Itoa(ports[0]),
			"AGENTRY_TEMPORAL_EMBEDDED_FRONTEND_PORT": strconv.Itoa(ports[1]),
			"AGENTRY_TEMPORAL_EMBEDDED_UI_ENABLED":    "false",
			"PROBE_PROVIDER_KEY":                      s.ProviderKey,
			"PROBE_HOOK_SECRET":                       s.HookSecret,
		},
		base:         fmt.Sprintf("http://127.0.0.1:%d", ports[0]),
		temporalAddr: fmt.Sprintf("127.0.0.1:%d", ports[1]),
	}, nil
}

// start runs the binary and waits until /health answers 200.
func (g *gatewayProc) start() error {
	p, err := gatewaytest.Launch(g.bin, g.home, g.env)
	if err != nil {
		return err
	}
	g.proc = p
	return gatewaytest.WaitReady(g.base+"/health", 3*time.Minute, p)
}

// crash kills the gateway with SIGKILL: no shutdown code runs.
func (g *gatewayProc) crash() error {
	err := g.proc.Crash()
	g.earlier = append(g.earlier, g.proc.Output.String())
	return err
}

// stop ends the gateway with SIGTERM (SIGKILL after 30 s).
func (g *gatewayProc) stop() {
	if g.proc == nil || g.proc.Cmd.ProcessState != nil {
		return
	}
	g.proc.Cmd.Process.Signal(syscall.SIGTERM)
	done := make(chan struct{})
	go func() { g.proc.Cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		g.proc.Stop()
	}
	g.earlier = append(g.earlier, g.proc.Output.String())
}

// output is what every process so far printed.
func (g *gatewayProc) output() string {
	out := ""
	for _, o := range g.earlier {
		out += o
	}
	if g.proc != nil && g.proc.Cmd.ProcessState == nil {
		out += g.proc.Output.String()
	}
	return out
}
