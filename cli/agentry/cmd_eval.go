package agentry

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"gopkg.in/yaml.v3"

	"github.com/agentryhq/agentry/internal/apiclient"
)

// EvalSuite is one suite file: {"name": ..., "cases": [...]}. JSON is the
// documented format; YAML files (.yaml/.yml) with the same keys work too.
type EvalSuite struct {
	Name  string     `json:"name" yaml:"name"`
	Cases []EvalCase `json:"cases" yaml:"cases"`
	File  string     `json:"-" yaml:"-"`
}

// EvalCase is one prompt and what its reply must contain.
type EvalCase struct {
	Name             string   `json:"name" yaml:"name"`
	Input            string   `json:"input" yaml:"input"`
	ExpectedContains []string `json:"expected_contains" yaml:"expected_contains"`
	Tags             []string `json:"tags,omitempty" yaml:"tags,omitempty"`
	// Skip (true or a reason) leaves the case out of a run.
	Skip any `json:"skip,omitempty" yaml:"skip,omitempty"`
}

func (c EvalCase) skipReason() string {
	switch v := c.Skip.(type) {
	case bool:
		if v {
			return "skipped in the suite"
		}
	case string:
		return v
	}
	return ""
}

// loadSuites reads a suite file or every *.json/*.yaml/*.yml file of a
// folder (sorted, not recursive).
func loadSuites(path string) ([]EvalSuite, error) {
	st, err := os.Stat(path)
	if err != nil {
		return nil, err
	}
	var files []string
	if st.IsDir() {
		entries, err := os.ReadDir(path)
		if err != nil {
			return nil, err
		}
		for _, e := range entries {
			ext := strings.ToLower(filepath.Ext(e.Name()))
			if !e.IsDir() && (ext == ".json" || ext == ".yaml" || ext == ".yml") {
				files = append(files, filepath.Join(path, e.Name()))
			}
		}
		sort.Strings(files)
		if len(files) == 0 {
			return nil, fmt.Errorf("%s holds no suite files (*.json, *.yaml)", path)
		}
	} else {
		files = []string{path}
	}
	var suites []EvalSuite
	for _, f := range files {
		s, err := loadSuite(f)
		if err != nil {
			return nil, err
		}
		suites = append(suites, s)
	}
	return suites, nil
}

func loadSuite(file string) (EvalSuite, error) {
	var s EvalSuite
	data, err := os.ReadFile(file)
	if err != nil {
		return s, err
	}
	switch strings.ToLower(filepath.Ext(file)) {
	case ".yaml", ".yml":
		err = yaml.Unmarshal(data, &s)
	default:
		dec := json.NewDecoder(strings.NewReader(string(data)))
		dec.DisallowUnknownFields()
		err = dec.Decode(&s)
	}
	if err != nil {
		return s, fmt.Errorf("suite %s: %w", file, err)
	}
	s.File = file
	if s.Name == "" {
		s.Name = strings.TrimSuffix(filepath.Base(file), filepath.Ext(file))
	}
	if len(s.Cases) == 0 {
		return s, fmt.Errorf("suite %s: no cases", file)
	}
	for i := range s.Cases {
		c := &s.Cases[i]
		if c.Name == "" {
			c.Name = fmt.Sprintf("case %d", i+1)
		}
		if strings.TrimSpace(c.Input) == "" {
			return s, fmt.Errorf("suite %s: cases[%d] (%s): input is empty", file, i, c.Name)
		}
	}
	return s, nil
}

// EvalResult is one execution of one case.
type EvalResult struct {
	Suite     string     `json:"suite"`
	Case      string     `json:"case"`
	Iteration int        `json:"iteration"`
	Status    string     `json:"status"` // pass, fail, skip
	LatencyMS int64      `json:"latency_ms,omitempty"`
	Missing   []string   `json:"missing,omitempty"`
	Error     string     `json:"error,omitempty"`
	Reason    string     `json:"reason,omitempty"`
	Reply     string     `json:"reply,omitempty"`
	RunID     string     `json:"run_id,omitempty"`
	Usage     *evalUsage `json:"usage,omitempty"`
	CostUSD   *float64   `json:"cost_usd,omitempty"`
}

// evalUsage is the token usage of one case in the report.
type evalUsage struct {
	InputTokens       int64 `json:"input_tokens"`
	OutputTokens      int64 `json:"output_tokens"`
	CachedInputTokens int64 `json:"cached_input_tokens,omitempty"`
}

// EvalSummary totals a run of suites. Counts are per execution: a case run
// with --repeat 3 counts three times.
type EvalSummary struct {
	Runs         int      `json:"runs"`
	Passed       int      `json:"passed"`
	Failed       int      `json:"failed"`
	Skipped      int      `json:"skipped"`
	LatencyP50MS int64    `json:"latency_p50_ms"`
	LatencyP95MS int64    `json:"latency_p95_ms"`
	InputTokens  *int64   `json:"input_tokens,omitempty"`
	OutputTokens *int64   `json:"output_tokens,omitempty"`
	CostUSD      *float64 `json:"cost_usd,omitempty"`
}

// EvalReport is what --json prints.
type EvalReport struct {
	Agent   string       `json:"agent"`
	Suites  []string     `json:"suites"`
	Results []EvalResult `json:"results"`
	Summary EvalSummary  `json:"summary"`
}

type evalOptions struct {
	agent, suite string
	tags         []string
	repeat       int
	failFast     bool
}

func (a *App) evalCommand() *cobra.Command {
	var o evalOptions
	cmd := &cobra.Command{
		Use:   "eval --agent ID --suite FILE|DIR [--tag T] [--repeat N] [--fail-fast] [--json]",
		Short: "Run evaluation suites against an agent; exit 1 when any case fails",
		Long: `Sends every case's input to the agent (POST /agents/{id}/trigger, source eval,
a fresh user per execution so cases do not share history) and checks that the
reply contains each expected_contains string (case-insensitive).

Suite file: {"name": "...", "cases": [{"name": "...", "input": "...",
"expected_contains": ["..."], "tags": ["..."]}]}; a case may carry
"skip": true or "skip": "reason". --tag keeps the cases with any of the given
tags (others count as skipped). Reports pass/fail/skip counts (per execution),
p50/p95 latency and token/cost totals when the gateway reports them. A
progress line is written to standard error while it runs.`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if o.agent == "" || o.suite == "" {
				return usagef("eval needs --agent ID and --suite FILE|DIR")
			}
			if o.repeat < 1 {
				return usagef("--repeat must be at least 1, got %d", o.repeat)
			}
			suites, err := loadSuites(o.suite)
			if err != nil {
				return err
			}
			c, err := a.client(runTimeout)
			if err != nil {
				return err
			}
			rep, err := a.runEval(cmd.Context(), c, suites, o)
			if err != nil {
				return err
			}
			if a.jsonOut {
				if err := printValue(a.Stdout, rep); err != nil {
					return err
				}
			} else {
				a.printEval(rep)
			}
			if rep.Summary.Failed > 0 {
				return silentFailure()
			}
			if rep.Summary.Passed == 0 && len(o.tags) > 0 {
				return &exitError{code: ExitFailure, msg: fmt.Sprintf("no case matches --tag %s", strings.Join(o.tags, ","))}
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.agent, "agent", "", "agent id (required)")
	f.StringVar(&o.suite, "suite", "", "suite file or folder of suite files (required)")
	f.StringSliceVar(&o.tags, "tag", nil, "run only cases with one of these tags (repeatable or comma-separated)")
	f.IntVar(&o.repeat, "repeat", 1, "run each case N times")
	f.BoolVar(&o.failFast, "fail-fast", false, "stop at the first failing case (the rest count as skipped)")
	return cmd
}

func hasAnyTag(c EvalCase, tags []string) bool {
	if len(tags) == 0 {
		return true
	}
	for _, t := range tags {
		for _, ct := range c.Tags {
			if strings.EqualFold(strings.TrimSpace(t), ct) {
				return true
			}
		}
	}
	return false
}

func (a *App) runEval(ctx context.Context, c *apiclient.Client, suites []EvalSuite, o evalOptions) (*EvalReport, error) {
	rep := &EvalReport{Agent: o.agent, Results: []EvalResult{}}
	total := 0
	for _, s := range suites {
		rep.Suites = append(rep.Suites, s.Name)
		total += len(s.Cases) * o.repeat
	}
	// Fail early on an unknown agent rather than with N identical failures.
	if _, err := c.Agent(ctx, o.agent); err != nil {
		return nil, err
	}
	progress := newProgress(a.Stderr, total)
	defer progress.done()
	batch := randomID()
	stop := false
	n := 0
	for _, s := range suites {
		for _, tc := range s.Cases {
			for it := 1; it <= o.repeat; it++ {
				n++
				res := EvalResult{Suite: s.Name, Case: tc.Name, Iteration: it}
				switch {
				case stop:
					res.Status, res.Reason = "skip", "fail-fast"
				case tc.skipReason() != "":
					res.Status, res.Reason = "skip", tc.skipReason()
				case !hasAnyTag(tc, o.tags):
					res.Status, res.Reason = "skip", "no matching tag"
				default:
					progress.update(n, s.Name, tc.Name, it, o.repeat)
					a.runCase(ctx, c, o.agent, fmt.Sprintf("eval-%s-%d", batch, n), tc, &res)
					if ctx.Err() != nil {
						return nil, ctx.Err()
					}
					if res.Status == "fail" && o.failFast {
						stop = true
					}
				}
				rep.Results = append(rep.Results, res)
			}
		}
	}
	rep.Summary = summarize(rep.Results)
	return rep, nil
}

func (a *App) runCase(ctx context.Context, c *apiclient.Client, agentID, user string, tc EvalCase, res *EvalResult) {
	start := time.Now()
	r, err := c.TriggerAgent(ctx, agentID, apiclient.TriggerRequest{Text: tc.Input, UserID: user, Source: "eval"})
	res.LatencyMS = time.Since(start).Milliseconds()
	if err != nil {
		res.Status, res.Error = "fail", err.Error()
		return
	}
	res.Reply, res.RunID = r.Reply, r.RunID
	if u := r.Usage; u != nil {
		res.Usage = &evalUsage{InputTokens: u.InputTokens, OutputTokens: u.OutputTokens, CachedInputTokens: u.CachedInputTokens}
	}
	lower := strings.ToLower(r.Reply)
	for _, want := range tc.ExpectedContains {
		if !strings.Contains(lower, strings.ToLower(want)) {
			res.Missing = append(res.Missing, want)
		}
	}
	res.Status = "pass"
	if len(res.Missing) > 0 {
		res.Status = "fail"
	}
}

func summarize(results []EvalResult) EvalSummary {
	var s EvalSummary
	var lat []int64
	var in, out int64
	var cost float64
	haveUsage, haveCost := false, false
	for _, r := range results {
		s.Runs++
		switch r.Status {
		case "pass":
			s.Passed++
		case "fail":
			s.Failed++
		default:
			s.Skipped++
		}
		if r.Status != "skip" {
			lat = append(lat, r.LatencyMS)
		}
		if r.Usage != nil {
			haveUsage = true
			in += r.Usage.InputTokens
			out += r.Usage.OutputTokens
		}
		if r.CostUSD != nil {
			haveCost = true
			cost += *r.CostUSD
		}
	}
	s.LatencyP50MS, s.LatencyP95MS = percentile(lat, 0.50), percentile(lat, 0.95)
	if haveUsage {
		s.InputTokens, s.OutputTokens = &in, &out
	}
	if haveCost {
		s.CostUSD = &cost
	}
	return s
}

// percentile is the nearest-rank percentile (0 for no samples).
func percentile(samples []int64, p float64) int64 {
	if len(samples) == 0 {
		return 0
	}
	s := append([]int64(nil), samples...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	idx := int(math.Ceil(p*float64(len(s)))) - 1
	idx = max(0, min(idx, len(s)-1))
	return s[idx]
}

func (a *App) printEval(rep *EvalReport) {
	rows := [][]string{}
	for _, r := range rep.Results {
		name := r.Case
		if len(rep.Suites) > 1 {
			name = r.Suite + "/" + r.Case
		}
		run := fmt.Sprintf("%d", r.Iteration)
		lat := "-"
		if r.Status != "skip" {
			lat = shortDuration(time.Duration(r.LatencyMS) * time.Millisecond)
		}
		detail := r.Reason
		switch {
		case r.Error != "":
			detail = r.Error
		case len(r.Missing) > 0:
			detail = "missing: " + strings.Join(quoteAll(r.Missing), ", ")
		}
		rows = append(rows, []string{name, run, strings.ToUpper(r.Status), lat, detail})
	}
	table(a.Stdout, []string{"CASE", "RUN", "RESULT", "LATENCY", "DETAIL"}, rows)
	s := rep.Summary
	fmt.Fprintf(a.Stdout, "\n%s: %d passed, %d failed, %d skipped (%d runs)\n", strings.Join(rep.Suites, ", "), s.Passed, s.Failed, s.Skipped, s.Runs)
	fmt.Fprintf(a.Stdout, "latency: p50 %s, p95 %s\n", shortDuration(time.Duration(s.LatencyP50MS)*time.Millisecond), shortDuration(time.Duration(s.LatencyP95MS)*time.Millisecond))
	if s.InputTokens != nil {
		fmt.Fprintf(a.Stdout, "tokens: %d in, %d out\n", *s.InputTokens, *s.OutputTokens)
	}
	if s.CostUSD != nil {
		fmt.Fprintf(a.Stdout, "cost: $%.6f\n", *s.CostUSD)
	}
}

func quoteAll(ss []string) []string {
	out := make([]string, len(ss))
	for i, s := range ss {
		out[i] = fmt.Sprintf("%q", s)
	}
	return out
}

func randomID() string {
	b := make([]byte, 4)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// progress writes one status line to stderr while eval runs: rewritten in
// place on a terminal, one line per execution otherwise.
type progress struct {
	w     io.Writer
	total int
	tty   bool
	shown bool
}

func newProgress(w io.Writer, total int) *progress {
	return &progress{w: w, total: total, tty: isTerminal(w)}
}

func (p *progress) update(n int, suite, name string, it, repeat int) {
	line := fmt.Sprintf("eval [%d/%d] %s/%s", n, p.total, suite, name)
	if repeat > 1 {
		line += fmt.Sprintf(" (run %d/%d)", it, repeat)
	}
	if p.tty {
		fmt.Fprintf(p.w, "\r\033[K%s", line)
	} else {
		fmt.Fprintln(p.w, line)
	}
	p.shown = true
}

func (p *progress) done() {
	if p.tty && p.shown {
		fmt.Fprint(p.w, "\r\033[K")
	}
}
