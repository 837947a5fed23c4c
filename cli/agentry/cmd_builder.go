package agentry

import (
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/spf13/cobra"

	"github.com/agentryhq/agentry/internal/apiclient"
)

// builderCommands are `agentry agent generate|refine|build`: the builder
// routes (POST /builder/*, docs/builder.md). Each request is its own
// accounting run under llm.studio's per-build allowance.
func (a *App) builderCommands() []*cobra.Command {
	var provider, model, id, out string
	progress := func(msg string) {
		if !a.jsonOut {
			fmt.Fprintln(a.Stderr, msg)
		}
	}
	printDraft := func(d *apiclient.BuilderDraft, diff bool) error {
		if out != "" {
			if err := os.WriteFile(out, []byte(d.Definition), 0o644); err != nil {
				return err
			}
		}
		if a.jsonOut {
			return printJSON(a.Stdout, d.RawJSON())
		}
		if diff && d.Diff != "" {
			fmt.Fprint(a.Stdout, d.Diff)
		} else if out == "" || diff {
			fmt.Fprint(a.Stdout, d.Definition)
		}
		if out != "" {
			fmt.Fprintf(a.Stderr, "Wrote %s.\n", out)
		}
		fmt.Fprintf(a.Stderr, "(%d draft(s), %d input + %d output tokens, $%.6f; run %s)\n",
			d.Attempts, d.Spent.InputTokens, d.Spent.OutputTokens, d.Spent.CostUSD, d.Spent.RunID)
		return nil
	}
	generate := &cobra.Command{
		Use:   "generate DESCRIPTION...",
		Short: "Draft an agent definition from a description (- reads it from stdin); nothing is saved",
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) == 0 {
				return usagef("agent generate takes a DESCRIPTION (or - for stdin)")
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			desc := strings.Join(args, " ")
			if desc == "-" {
				b, err := io.ReadAll(io.LimitReader(os.Stdin, 1<<20+1))
				if err != nil {
					return err
				}
				desc = string(b)
			}
			c, err := a.client(runTimeout)
			if err != nil {
				return err
			}
			progress("Drafting the agent...")
			d, err := c.BuilderGenerate(cmd.Context(), apiclient.BuilderGenerateRequest{Description: desc, ID: id,
				Builder: apiclient.BuilderModel{Provider: provider, Model: model}})
			if err != nil {
				return err
			}
			return printDraft(d, false)
		},
	}
	generate.Flags().StringVar(&id, "id", "", "the id the agent must have")
	refine := &cobra.Command{
		Use:   "refine FILE INSTRUCTION...",
		Short: "Change a definition as instructed and print the diff (-o writes the changed definition)",
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) < 2 {
				return usagef("agent refine takes FILE INSTRUCTION...")
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			def, err := os.ReadFile(args[0])
			if err != nil {
				return err
			}
			c, err := a.client(runTimeout)
			if err != nil {
				return err
			}
			progress("Refining " + args[0] + "...")
			d, err := c.BuilderRefine(cmd.Context(), apiclient.BuilderRefineRequest{Definition: string(def), Instruction: strings.Join(args[1:], " "),
				Builder: apiclient.BuilderModel{Provider: provider, Model: model}})
			if err != nil {
				return err
			}
			return printDraft(d, true)
		},
	}
	for _, c := range []*cobra.Command{generate, refine} {
		c.Flags().StringVar(&provider, "builder-provider", "", "provider of the builder's model (default llm.default_provider)")
		c.Flags().StringVar(&model, "builder-model", "", "the builder's model (default the provider's default_model)")
		c.Flags().StringVarP(&out, "output", "o", "", "write the definition to this file")
	}
	var enabled, overwrite bool
	var evals string
	build := &cobra.Command{
		Use:   "build FILE",
		Short: "Validate a definition, run its eval suite (--evals) and save it on the gateway",
		Args:  exactArgs(1, "FILE"),
		RunE: func(cmd *cobra.Command, args []string) error {
			def, err := os.ReadFile(args[0])
			if err != nil {
				return err
			}
			req := apiclient.BuilderBuildRequest{Definition: string(def), Enabled: enabled, Overwrite: overwrite}
			if evals != "" {
				s, err := loadSuite(evals)
				if err != nil {
					return fmt.Errorf("read suite %s: %w", evals, err)
				}
				req.Evals.Name = s.Name
				for _, tc := range s.Cases {
					if tc.skipReason() != "" {
						continue
					}
					req.Evals.Cases = append(req.Evals.Cases, apiclient.BuilderEvalCase{Name: tc.Name, Input: tc.Input, ExpectedContains: tc.ExpectedContains})
				}
			}
			c, err := a.client(runTimeout)
			if err != nil {
				return err
			}
			if len(req.Evals.Cases) > 0 {
				progress(fmt.Sprintf("Running %d eval case(s), then saving...", len(req.Evals.Cases)))
			}
			r, err := c.BuilderBuild(cmd.Context(), req)
			if err != nil {
				return err
			}
			if a.jsonOut {
				return printJSON(a.Stdout, r.RawJSON())
			}
			for _, e := range r.Evals {
				fmt.Fprintf(a.Stdout, "PASS %s\n", e.Name)
			}
			state := "disabled"
			if r.Enabled {
				state = "enabled"
			}
			fmt.Fprintf(a.Stdout, "Agent %s saved (%s) as %s.\n", r.ID, state, r.File)
			return nil
		},
	}
	build.Flags().BoolVar(&enabled, "enable", false, "save the agent enabled (default disabled)")
	build.Flags().BoolVar(&overwrite, "overwrite", false, "replace an agent with the same id")
	build.Flags().StringVar(&evals, "evals", "", "eval suite file (the format of agentry eval) that must pass before saving")
	return []*cobra.Command{generate, refine, build}
}
