package workflows

import (
	"errors"
	"fmt"
	"time"

	"go.temporal.io/sdk/workflow"

	"github.com/agentryhq/agentry/internal/agent"
	"github.com/agentryhq/agentry/internal/llm"
)

// The agent-run core: the one piece of workflow code that drives a durable
// agent run (a task run, a scheduled firing). It runs the deterministic
// loop of internal/agent through durableExecutor, whose LLM turns and tool
// calls are activities that keep the conversation in the run log
// (internal/runlog); the workflow holds positions, stand-ins and short
// summaries only, so a run's history grows by a few KiB per turn however
// large the tool results are. The loop is bounded by a deadline carried
// across continue-as-new.

const (
	// DefaultContinueAsNewEvents is the history length from which a run
	// continues as new at its next turn (about 12 events a turn).
	DefaultContinueAsNewEvents = 2000
	// ContinueAsNewBytes is the history size from which a run continues as
	// new at its next turn.
	ContinueAsNewBytes = 2 << 20
	// MaxRunHistoryBytes fails a run whose history grew this large anyway
	// (within one turn), well before Temporal's own 50 MB limit would
	// terminate it without a word.
	MaxRunHistoryBytes = 16 << 20
)

// agentRun is one durable agent run as the core drives it.
type agentRun struct {
	ref RunRef
	// outline is the agent input with its texts replaced by stand-ins
	// (agent.Input.Outline); the activities load the full one.
	outline agent.Input
	// llmStep and toolStep name the activities of the run's kind.
	llmStep, toolStep string
	llmOpts, toolOpts workflow.ActivityOptions
	// continueAfter is the history length that triggers continue-as-new.
	continueAfter int
	// onTurn is told about every finished LLM turn (progress).
	onTurn func(turn int, usage llm.Usage)

	// approvals names the tools a person must approve (approval.go).
	approvals ApprovalPolicy
	// onWait is told when the run parks (what for) and resumes ("").
	onWait func(waitingFor string)
	// deadline is when the run's working time runs out; parked time moves
	// it later. parked is true while the run waits for a person.
	deadline time.Time
	parked   bool
	pending  *pendingApproval

	// budgetWait bounds the time the run may park waiting for budget in
	// all (0: a budget refusal fails it); budgetWaited is what it used so
	// far; waitStep is the local activity that records parks
	// (budgetwait.go).
	budgetWait, budgetWaited time.Duration
	waitStep                 string

	// reuse are the recorded steps of the failed attempt a retried run
	// goes on from (retry.go); nil for other runs.
	reuse *ReusedSteps

	// localFileTools runs the built-in file tools as local activities
	// (localTools). It comes from the run's input, so a history recorded
	// before it existed replays with its tool activities (no GetVersion:
	// see docs/decisions.md, "Task runs: file tools as local activities").
	localFileTools bool
	// localLLMTurns runs the LLM turns as local activities (CallLLM), from
	// the run's input like localFileTools.
	localLLMTurns bool

	// delegation is set when the agent has peers (delegate.go); children
	// counts the peer runs started by this run that run now.
	delegation *Delegation
	children   int
}

// errContinueAsNew stops the loop between turns so the workflow can
// continue as new with the checkpoint.
var errContinueAsNew = errors.New("continue as new")

// agentRunResult is how a bounded run ended.
type agentRunResult struct {
	out      *agent.Output
	err      error
	timedOut bool
	// next is set when the run should continue as new from it.
	next *agent.Checkpoint
	// deadline is the run's deadline as it stands now (moved by parked
	// time) and budgetWaited the time parked for budget so far: a
	// continue-as-new carries both.
	deadline     time.Time
	budgetWaited time.Duration
}

// runUntil drives the loop from a checkpoint (nil: the start) until it
// ends, the deadline passes (the loop is then cancelled), the workflow is
// cancelled or the history asks for a continue-as-new.
func (r *agentRun) runUntil(ctx workflow.Context, from *agent.Checkpoint, deadline time.Time) (res agentRunResult) {
	r.deadline = deadline
	defer func() { res.deadline, res.budgetWaited = r.deadline, r.budgetWaited }()
	if len(r.approvals.Tools) > 0 {
		if err := r.handleApprovals(ctx); err != nil {
			res.err = err
			return res
		}
	}
	loopCtx, cancelLoop := workflow.WithCancel(ctx)
	timerCtx, cancelTimer := workflow.WithCancel(ctx)
	defer func() { cancelTimer() }()
	left := deadline.Sub(workflow.Now(ctx))
	if left <= 0 {
		res.timedOut = true
		cancelLoop()
		return res
	}
	timer := workflow.NewTimer(timerCtx, left)

	exec := &durableExecutor{run: r}
	loopDone, setDone := workflow.NewFuture(ctx)
	workflow.Go(loopCtx, func(gctx workflow.Context) {
		exec.ctx = gctx
		res.out, res.err = agent.Resume(exec, r.outline, from)
		setDone.Set(nil, nil)
	})

	for {
		fired := false
		sel := workflow.NewSelector(ctx)
		sel.AddFuture(loopDone, func(workflow.Future) {})
		sel.AddFuture(timer, func(f workflow.Future) { fired = f.Get(ctx, nil) == nil }) // not cancelled
		sel.Select(ctx)
		if !fired {
			break
		}
		// Time parked for a person does not count: the deadline moved by
		// it, and a park still going on ends first.
		if r.parked {
			_ = workflow.Await(ctx, func() bool { return !r.parked || loopDone.IsReady() })
		}
		// A peer run in flight bounds itself by this run's deadline (moved
		// by its own parked time), which this run takes over when it ends.
		if r.children > 0 {
			_ = workflow.Await(ctx, func() bool { return r.children == 0 || loopDone.IsReady() })
		}
		left := r.deadline.Sub(workflow.Now(ctx))
		if ctx.Err() != nil || loopDone.IsReady() {
			break
		}
		if left <= 0 {
			res.timedOut = true
			cancelLoop()
			break
		}
		timerCtx, cancelTimer = workflow.WithCancel(ctx)
		timer = workflow.NewTimer(timerCtx, left)
	}
	cancelTimer()
	_ = loopDone.Get(ctx, nil) // after a timeout, wait for the cancelled step to hand back
	cancelLoop()
	if errors.Is(res.err, errContinueAsNew) {
		res.err, res.next = nil, exec.checkpoint
	}
	return res
}

// durableExecutor is the agent.Executor of a workflow: each step is an
// activity, identified by the positions of its messages in the run log.
type durableExecutor struct {
	ctx workflow.Context
	run *agentRun
	// callSeq is the position of the last assistant message, nextSeq where
	// the next tool result goes, index the next tool call's place in it.
	callSeq, nextSeq, index int
	checkpoint              *agent.Checkpoint
	// calls are the tool calls of the current turn; asked the delegations
	// of it started together (delegate.go), by call index.
	calls []llm.ToolCall
	asked map[int]*askedPeer
}

// CallLLM runs one LLM turn: an activity, or in a run that asks for it
// (localLLMTurns) a local activity, which runs inside the workflow task
// that reaches the turn and is recorded as a marker when the task
// completes: no activity task, no matching hop, no workflow task of its
// own. A turn can take minutes; the SDK keeps the workflow task alive
// meanwhile. The step is idempotent (activities.LLMTurn hands back an
// answer already in the run log), which a local activity needs: a worker
// that dies before the workflow task completes runs it again.
func (e *durableExecutor) CallLLM(t agent.TurnRequest) (*llm.Response, error) {
	n := len(t.Request.Messages)
	resp, reused, err := e.reusedAnswer(t.Turn, n)
	if err != nil {
		return nil, err
	}
	if !reused {
		in := LLMTurnInput{Run: e.run.ref, Turn: t.Turn, Messages: n, ToolChoice: t.Request.ToolChoice}
		var err error
		if e.run.localLLMTurns {
			ctx := workflow.WithLocalActivityOptions(e.ctx, localOptions(e.run.llmOpts))
			err = workflow.ExecuteLocalActivity(ctx, e.run.llmStep, in).Get(ctx, &resp)
		} else {
			ctx := workflow.WithActivityOptions(e.ctx, e.run.llmOpts)
			err = workflow.ExecuteActivity(ctx, e.run.llmStep, in).Get(ctx, &resp)
		}
		if costCapRefusal(err) {
			err = e.waitForCostCap(in, err, &resp)
		}
		if code, ok := budgetRefusal(err); ok && e.run.budgetWait > 0 {
			err = e.waitForBudget(in, code, err, &resp)
		}
		if err != nil {
			return nil, stepError(err)
		}
	}
	e.callSeq, e.nextSeq, e.index = n, n+1, 0
	e.calls, e.asked = resp.ToolCalls, nil
	if e.run.onTurn != nil {
		e.run.onTurn(t.Turn, resp.Usage)
	}
	return &resp, nil
}

func (e *durableExecutor) CallTool(inv agent.ToolInvocation) (agent.ToolResult, error) {
	if res, ok := e.run.reuse.result(inv.Turn, e.index); ok { // recorded by the retried attempt
		e.index++
		e.nextSeq++
		return res, nil
	}
	if e.run.approvals.Needs(inv.Call.Name) {
		res, approved, err := e.askApproval(inv)
		if err != nil {
			return agent.ToolResult{}, err
		}
		if !approved { // the model sees why the call was not made
			e.index++
			e.nextSeq++
			return res, nil
		}
	}
	if e.isDelegation(inv.Call.Name) {
		return e.delegate(inv)
	}
	in := ToolInput{Run: e.run.ref, Turn: inv.Turn, CallSeq: e.callSeq, Index: e.index, ResultSeq: e.nextSeq,
		CallID: inv.Call.ID, Name: inv.Call.Name}
	var res agent.ToolResult
	var err error
	if e.runsLocally(inv.Call.Name) {
		ctx := workflow.WithLocalActivityOptions(e.ctx, localOptions(e.run.toolOpts))
		err = workflow.ExecuteLocalActivity(ctx, e.run.toolStep, in).Get(ctx, &res)
	} else {
		ctx := workflow.WithActivityOptions(e.ctx, e.run.toolOpts)
		err = workflow.ExecuteActivity(ctx, e.run.toolStep, in).Get(ctx, &res)
	}
	if err != nil {
		return agent.ToolResult{}, stepError(err)
	}
	e.index++
	e.nextSeq++
	return res, nil
}

// localTools are the tools whose step runs as a local activity in a run
// that asks for it (agentRun.localFileTools): quick reads and writes in the
// run's own work directory. The step is the same activity function either
// way and is idempotent (the call is read from the run log, the result
// stored under its position, the artifact record and its event
// deduplicated), which a local activity needs: a worker that dies before
// the workflow task completes runs it again. It saves a workflow task and
// an activity task per call: the result is recorded as one marker event in
// the workflow task that schedules the next LLM turn. Network tools
// (http_get), MCP and skill tools, which may run for minutes and want
// heartbeats, stay activities.
var localTools = map[string]bool{"read_file": true, "write_file": true}

// runsLocally tells whether the tool call runs as a local activity.
func (e *durableExecutor) runsLocally(tool string) bool {
	return e.run.localFileTools && localTools[tool]
}

// localOptions are a step's activity options as local activity options:
// the same start-to-close bound and retry policy (the steps give up after
// their own attempt limits). A local activity has no heartbeat: a worker
// that dies is noticed by the workflow task's timeout instead, and the
// step runs again on the worker that takes the run over.
func localOptions(o workflow.ActivityOptions) workflow.LocalActivityOptions {
	return workflow.LocalActivityOptions{StartToCloseTimeout: o.StartToCloseTimeout, RetryPolicy: o.RetryPolicy}
}

// BeforeTurn continues the run as new once its history is long or large,
// and fails it should one turn have grown the history past
// MaxRunHistoryBytes anyway.
func (e *durableExecutor) BeforeTurn(cp agent.Checkpoint) error {
	info := workflow.GetInfo(e.ctx)
	if size := info.GetCurrentHistorySize(); size > MaxRunHistoryBytes {
		return fmt.Errorf("the run's workflow history reached %d bytes (limit %d); it was stopped before Temporal's own limit would end it",
			size, MaxRunHistoryBytes)
	}
	limit := e.run.continueAfter
	if limit <= 0 {
		limit = DefaultContinueAsNewEvents
	}
	if info.GetContinueAsNewSuggested() || info.GetCurrentHistoryLength() >= limit || info.GetCurrentHistorySize() >= ContinueAsNewBytes {
		cp.Messages = append([]llm.Message(nil), cp.Messages...)
		e.checkpoint = &cp
		return errContinueAsNew
	}
	return nil
}
