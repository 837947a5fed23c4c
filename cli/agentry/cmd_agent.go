package agentry

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"

	"github.com/spf13/cobra"

	"github.com/agentryhq/agentry/internal/agentdef"
	"github.com/agentryhq/agentry/internal/apiclient"
)

func (a *App) agentCommand() *cobra.Command {
	list := &cobra.Command{
		Use:   "list",
		Short: "List agents",
		Args:  noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := a.client(0)
			if err != nil {
				return err
			}
			l, err := c.Agents(cmd.Context())
			if err != nil {
				return err
			}
			if a.jsonOut {
				return printJSON(a.Stdout, l.RawJSON())
			}
			rows := [][]string{}
			for _, ag := range l.Agents {
				rows = append(rows, []string{ag.ID, ag.LLM.Provider, ag.LLM.Model, strings.Join(ag.Channels, ","), strings.Join(ag.Builtins, ","), ag.Description})
			}
			table(a.Stdout, []string{"ID", "PROVIDER", "MODEL", "CHANNELS", "BUILTINS", "DESCRIPTION"}, rows)
			return nil
		},
	}

	get := &cobra.Command{
		Use:   "get ID",
		Short: "Show one agent",
		Args:  exactArgs(1, "ID"),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := a.client(0)
			if err != nil {
				return err
			}
			ag, err := c.Agent(cmd.Context(), args[0])
			if err != nil {
				return err
			}
			if a.jsonOut {
				return printJSON(a.Stdout, ag.RawJSON())
			}
			a.printAgent(ag)
			return nil
		},
	}

	var createFile string
	create := &cobra.Command{
		Use:   "create --file PATH",
		Short: "Create an agent from a definition file (validated here first, then written by the gateway)",
		Args:  noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if createFile == "" {
				return usagef("agent create needs --file PATH")
			}
			data, err := os.ReadFile(createFile)
			if err != nil {
				return fmt.Errorf("read %s: %w", createFile, err)
			}
			if _, err := agentdef.Parse(data, createFile); err != nil {
				a.printProblems(err)
				return &exitError{code: ExitFailure, msg: fmt.Sprintf("%s is not a valid agent definition; nothing was sent", createFile)}
			}
			c, err := a.client(0)
			if err != nil {
				return err
			}
			ag, err := c.CreateAgent(cmd.Context(), string(data), filepath.Base(createFile))
			if err != nil {
				return err
			}
			if a.jsonOut {
				return printJSON(a.Stdout, ag.RawJSON())
			}
			fmt.Fprintf(a.Stdout, "Created agent %s.\n", ag.ID)
			return nil
		},
	}
	create.Flags().StringVarP(&createFile, "file", "f", "", "agent definition file (YAML)")

	validate := &cobra.Command{
		Use:   "validate PATH...",
		Short: "Check agent definition files locally (file, line and key of every problem; exit 1 on any)",
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) == 0 {
				return usagef("agent validate takes one or more files or folders")
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error { return a.validateAgents(args) },
	}
	validate.Annotations = map[string]string{annotationNoTarget: "true"}

	setEnabled := func(on bool) func(*cobra.Command, []string) error {
		return func(cmd *cobra.Command, args []string) error {
			c, err := a.client(0)
			if err != nil {
				return err
			}
			ag, err := c.SetAgentEnabled(cmd.Context(), args[0], on)
			if err != nil {
				return err
			}
			if a.jsonOut {
				return printJSON(a.Stdout, ag.RawJSON())
			}
			state := "disabled"
			if on {
				state = "enabled"
			}
			fmt.Fprintf(a.Stdout, "Agent %s %s.\n", ag.ID, state)
			return nil
		}
	}
	enable := &cobra.Command{Use: "enable ID", Short: "Enable an agent (sets enabled: true in its file)", Args: exactArgs(1, "ID"), RunE: setEnabled(true)}
	disable := &cobra.Command{Use: "disable ID", Short: "Disable an agent (sets enabled: false in its file)", Args: exactArgs(1, "ID"), RunE: setEnabled(false)}

	var triggerUser string
	trigger := &cobra.Command{
		Use:   "trigger ID [TEXT...]",
		Short: "Run an agent now and print its reply (TEXT defaults to the agent's schedule.prompt)",
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) == 0 {
				return usagef("agent trigger takes ID [TEXT...]")
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := a.client(runTimeout)
			if err != nil {
				return err
			}
			r, err := c.TriggerAgent(cmd.Context(), args[0], apiclient.TriggerRequest{Text: strings.Join(args[1:], " "), UserID: triggerUser})
			if err != nil {
				return err
			}
			if a.jsonOut {
				return printJSON(a.Stdout, r.RawJSON())
			}
			fmt.Fprintln(a.Stdout, r.Reply)
			fmt.Fprintf(a.Stderr, "(run %s, session %s)\n", r.RunID, r.SessionID)
			return nil
		},
	}
	trigger.Flags().StringVar(&triggerUser, "user", "", "user id the run is attributed to (default trigger-user)")

	del := &cobra.Command{
		Use:   "delete ID",
		Short: "Delete an agent (its file in the gateway's workspace agents folder)",
		Args:  exactArgs(1, "ID"),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := a.client(0)
			if err != nil {
				return err
			}
			if err := c.DeleteAgent(cmd.Context(), args[0]); err != nil {
				return err
			}
			if a.jsonOut {
				return printValue(a.Stdout, map[string]any{"id": args[0], "deleted": true})
			}
			fmt.Fprintf(a.Stdout, "Agent %s deleted.\n", args[0])
			return nil
		},
	}
	cmds := []*cobra.Command{list, get, create, validate, enable, disable, trigger, del, a.agentPackageCommand()}
	return group("agent", "Manage agents", append(cmds, a.builderCommands()...)...)
}

func (a *App) printAgent(ag *apiclient.Agent) {
	enabled := "-"
	if ag.Enabled != nil {
		enabled = yesNo(*ag.Enabled)
	}
	maxTok := ""
	if ag.LLM.MaxTokens > 0 {
		maxTok = strconv.FormatInt(ag.LLM.MaxTokens, 10)
	}
	sched := ""
	if len(ag.Schedule) > 0 && string(ag.Schedule) != "null" {
		sched = string(ag.Schedule)
	}
	keyValues(a.Stdout, [][2]string{
		{"id", ag.ID}, {"name", ag.Name}, {"description", ag.Description}, {"enabled", enabled},
		{"provider", ag.LLM.Provider}, {"model", ag.LLM.Model}, {"max tokens", maxTok},
		{"trigger", string(ag.Trigger)}, {"schedule", sched},
		{"channels", strings.Join(ag.Channels, ", ")}, {"builtins", strings.Join(ag.Builtins, ", ")},
	})
	if ag.SystemPrompt != "" {
		fmt.Fprintf(a.Stdout, "system prompt:\n%s\n", indent(ag.SystemPrompt, "  "))
	}
}

func indent(s, prefix string) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	for i := range lines {
		lines[i] = prefix + lines[i]
	}
	return strings.Join(lines, "\n")
}

// printProblems writes the problems of a definition, one a line, to stderr.
func (a *App) printProblems(err error) {
	var ve *agentdef.ValidationError
	if errors.As(err, &ve) {
		for _, p := range ve.Problems {
			fmt.Fprintln(a.Stderr, p.Error())
		}
		return
	}
	fmt.Fprintln(a.Stderr, err)
}

type problemJSON struct {
	File    string `json:"file"`
	Line    int    `json:"line,omitempty"`
	Key     string `json:"key,omitempty"`
	Message string `json:"message"`
}

type validatedFile struct {
	File     string        `json:"file"`
	ID       string        `json:"id,omitempty"`
	Valid    bool          `json:"valid"`
	Problems []problemJSON `json:"problems"`
}

// validateAgents checks files (and the *.yaml/*.yml files of folders)
// with the gateway's own parser, offline.
func (a *App) validateAgents(paths []string) error {
	var files []string
	for _, p := range paths {
		st, err := os.Stat(p)
		if err != nil {
			return fmt.Errorf("%s: %w", p, err)
		}
		if !st.IsDir() {
			files = append(files, p)
			continue
		}
		entries, err := os.ReadDir(p)
		if err != nil {
			return fmt.Errorf("%s: %w", p, err)
		}
		for _, e := range entries {
			if ext := filepath.Ext(e.Name()); !e.IsDir() && (ext == ".yaml" || ext == ".yml") && !strings.HasPrefix(e.Name(), ".") {
				files = append(files, filepath.Join(p, e.Name()))
			}
		}
	}
	sort.Strings(files)
	results := make([]validatedFile, 0, len(files))
	bad := 0
	for _, f := range files {
		res := validatedFile{File: f, Problems: []problemJSON{}}
		data, err := os.ReadFile(f)
		if err != nil {
			res.Problems = append(res.Problems, problemJSON{File: f, Message: err.Error()})
		} else if def, err := agentdef.Parse(data, f); err != nil {
			var ve *agentdef.ValidationError
			if errors.As(err, &ve) {
				for _, p := range ve.Problems {
					res.Problems = append(res.Problems, problemJSON{File: p.File, Line: p.Line, Key: p.Key, Message: p.Msg})
				}
			} else {
				res.Problems = append(res.Problems, problemJSON{File: f, Message: err.Error()})
			}
		} else {
			res.ID = def.ID
		}
		res.Valid = len(res.Problems) == 0
		if !res.Valid {
			bad++
		}
		results = append(results, res)
	}
	if a.jsonOut {
		if err := printValue(a.Stdout, map[string]any{"files": results, "valid": bad == 0}); err != nil {
			return err
		}
	} else {
		for _, r := range results {
			if r.Valid {
				fmt.Fprintf(a.Stdout, "%s: ok (agent %s)\n", r.File, r.ID)
				continue
			}
			for _, p := range r.Problems {
				a.writeProblem(a.Stderr, p)
			}
		}
	}
	if len(files) == 0 {
		return &exitError{code: ExitFailure, msg: "no agent definition files found"}
	}
	if bad > 0 {
		return &exitError{code: ExitFailure, msg: fmt.Sprintf("%d of %d file(s) invalid", bad, len(files))}
	}
	return nil
}

func (a *App) writeProblem(w io.Writer, p problemJSON) {
	fmt.Fprintln(w, agentdef.FieldError{File: p.File, Line: p.Line, Key: p.Key, Msg: p.Message}.Error())
}
