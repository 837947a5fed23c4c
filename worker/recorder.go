package worker

import (
	"reflect"
	"runtime"
	"slices"
	"strings"

	"github.com/nexus-rpc/sdk-go/nexus"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/workflow"
)

// Recorder is a registry that only notes names: the workflow types and
// activity names a worker registers (Worker.Register). Tests use it to
// check that every feature's workflows and activities are wired, without
// a Temporal server.
type Recorder struct {
	Workflows  []string
	Activities []string
}

// Registered lists what w registers, each list sorted.
func Registered(w *Worker) Recorder {
	var r Recorder
	w.Register(&r)
	slices.Sort(r.Workflows)
	slices.Sort(r.Activities)
	return r
}

func (r *Recorder) RegisterWorkflow(w any) { r.Workflows = append(r.Workflows, funcName(w)) }

func (r *Recorder) RegisterWorkflowWithOptions(w any, o workflow.RegisterOptions) {
	if o.Name == "" {
		o.Name = funcName(w)
	}
	r.Workflows = append(r.Workflows, o.Name)
}

func (r *Recorder) RegisterDynamicWorkflow(any, workflow.DynamicRegisterOptions) {
	r.Workflows = append(r.Workflows, "(dynamic)")
}

// RegisterActivity notes a function under its name, a struct pointer as
// each of its exported methods (as the SDK registers it).
func (r *Recorder) RegisterActivity(a any) {
	r.RegisterActivityWithOptions(a, activity.RegisterOptions{})
}

func (r *Recorder) RegisterActivityWithOptions(a any, o activity.RegisterOptions) {
	t := reflect.TypeOf(a)
	if t.Kind() == reflect.Func {
		if o.Name == "" {
			o.Name = funcName(a)
		}
		r.Activities = append(r.Activities, o.Name)
		return
	}
	for i := range t.NumMethod() {
		r.Activities = append(r.Activities, o.Name+t.Method(i).Name)
	}
}

func (r *Recorder) RegisterDynamicActivity(any, activity.DynamicRegisterOptions) {
	r.Activities = append(r.Activities, "(dynamic)")
}

func (r *Recorder) RegisterNexusService(*nexus.Service) {}

// funcName is a function's short name, as the SDK names it.
func funcName(f any) string {
	name := runtime.FuncForPC(reflect.ValueOf(f).Pointer()).Name()
	name = name[strings.LastIndex(name, ".")+1:]
	return strings.TrimSuffix(name, "-fm")
}
