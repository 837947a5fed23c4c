package agentry

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/agentryhq/agentry/internal/apiclient"
)

// knowledgeCommand is `knowledge list|documents|add|reindex|search`
// (docs/knowledge.md). add and reindex show the ingestion's progress until
// the base is no longer indexing (--detach returns at once).
func (a *App) knowledgeCommand() *cobra.Command {
	cmd := &cobra.Command{Use: "knowledge", Short: "Knowledge bases: sources, documents, ingestion status and search"}
	list := &cobra.Command{
		Use:   "list",
		Short: "List the knowledge bases with their status",
		Args:  exactArgs(0),
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := a.client(0)
			if err != nil {
				return err
			}
			l, err := c.KnowledgeBases(cmd.Context())
			if err != nil {
				return err
			}
			if a.jsonOut {
				return printJSON(a.Stdout, l.RawJSON())
			}
			if len(l.Bases) == 0 {
				fmt.Fprintln(a.Stdout, "No knowledge bases (knowledge.bases in config.yaml).")
				return nil
			}
			fmt.Fprintf(a.Stdout, "%-20s %-9s %6s %6s %6s %7s  %s\n", "BASE", "STATUS", "DOCS", "READY", "FAILED", "CHUNKS", "DESCRIPTION")
			for _, b := range l.Bases {
				fmt.Fprintf(a.Stdout, "%-20s %-9s %6d %6d %6d %7d  %s\n", b.ID, b.Status, b.Documents, b.Ready, b.Failed, b.Chunks, b.Description)
			}
			return nil
		},
	}
	documents := &cobra.Command{
		Use:   "documents BASE",
		Short: "List a base's documents with their status (failed ones with the reason)",
		Args:  exactArgs(1, "BASE"),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := a.client(0)
			if err != nil {
				return err
			}
			l, err := c.KnowledgeDocuments(cmd.Context(), args[0])
			if err != nil {
				return err
			}
			if a.jsonOut {
				return printJSON(a.Stdout, l.RawJSON())
			}
			for _, d := range l.Documents {
				status := string(d.Status)
				if d.WaitingFor != "" {
					status += " (waiting for " + d.WaitingFor + ")"
				}
				line := fmt.Sprintf("%-9s %5d chunks  %s", status, d.Chunks, d.Source)
				if d.Error != "" {
					line += "\n          " + d.Error
				}
				fmt.Fprintln(a.Stdout, line)
			}
			fmt.Fprintf(a.Stdout, "%d documents\n", l.Count)
			return nil
		},
	}
	var detach bool
	add := &cobra.Command{
		Use:   "add BASE SOURCE [--detach]",
		Short: "Add a source (a path relative to the workspace, a glob or an http(s) URL) and index it",
		Args:  exactArgs(2, "BASE", "SOURCE"),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := a.client(0)
			if err != nil {
				return err
			}
			b, err := c.AddKnowledgeSource(cmd.Context(), args[0], args[1])
			if err != nil {
				return err
			}
			if detach {
				if a.jsonOut {
					return printJSON(a.Stdout, b.RawJSON())
				}
				fmt.Fprintf(a.Stdout, "Added %s to %s; indexing. Follow it with: agentry knowledge documents %s\n", args[1], args[0], args[0])
				return nil
			}
			return a.followKnowledge(cmd.Context(), c, args[0])
		},
	}
	add.Flags().BoolVar(&detach, "detach", false, "return without waiting for the ingestion")
	reindex := &cobra.Command{
		Use:   "reindex BASE [--detach]",
		Short: "Index a base's sources again (unchanged documents cost nothing)",
		Args:  exactArgs(1, "BASE"),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := a.client(0)
			if err != nil {
				return err
			}
			r, err := c.ReindexKnowledge(cmd.Context(), args[0])
			if err != nil {
				return err
			}
			if detach {
				if a.jsonOut {
					return printJSON(a.Stdout, r.RawJSON())
				}
				fmt.Fprintf(a.Stdout, "Started %d ingestions of %s.\n", r.Started, args[0])
				return nil
			}
			fmt.Fprintf(a.Stderr, "Started %d ingestions of %s.\n", r.Started, args[0])
			return a.followKnowledge(cmd.Context(), c, args[0])
		},
	}
	reindex.Flags().BoolVar(&detach, "detach", false, "return without waiting for the ingestion")
	var k int
	search := &cobra.Command{
		Use:   "search BASE QUERY... [--k N]",
		Short: "Search a base (hybrid: full text and vector similarity) and show passages with their citations",
		Args:  cobra.MinimumNArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := a.client(0)
			if err != nil {
				return err
			}
			r, err := c.SearchKnowledge(cmd.Context(), args[0], strings.Join(args[1:], " "), k)
			if err != nil {
				return err
			}
			if a.jsonOut {
				return printJSON(a.Stdout, r.RawJSON())
			}
			if r.Truncated {
				fmt.Fprintln(a.Stderr, "(the query was cut to 2000 characters)")
			}
			if len(r.Passages) == 0 {
				fmt.Fprintln(a.Stdout, "No passage matches.")
			}
			for i, p := range r.Passages {
				fmt.Fprintf(a.Stdout, "%d. [%s#%d] score %.3f\n   %s\n", i+1, p.Source, p.Position, p.Score, strings.ReplaceAll(strings.TrimSpace(p.Text), "\n", "\n   "))
			}
			return nil
		},
	}
	search.Flags().IntVar(&k, "k", 0, "passages to show (default knowledge.top_k)")
	cmd.AddCommand(list, documents, add, reindex, search)
	return cmd
}

// KnowledgePollInterval is how often the client asks for a base's
// progress.
var KnowledgePollInterval = 500 * time.Millisecond

// followKnowledge prints a base's progress (to stderr) until no document
// is queued or indexing, then the outcome; failed documents are listed and
// make exit 1.
func (a *App) followKnowledge(ctx context.Context, c *apiclient.Client, id string) error {
	ctx, cancel := context.WithTimeout(ctx, runTimeout)
	defer cancel()
	last := ""
	for {
		b, err := c.KnowledgeBase(ctx, id)
		if err != nil {
			return err
		}
		line := fmt.Sprintf("  %s: %d of %d documents ready, %d indexing, %d queued, %d failed", id, b.Ready, b.Documents, b.Indexing, b.Queued, b.Failed)
		if line != last {
			fmt.Fprintln(a.Stderr, line)
			last = line
		}
		if b.Queued+b.Indexing == 0 {
			if a.jsonOut {
				if err := printJSON(a.Stdout, b.RawJSON()); err != nil {
					return err
				}
			} else {
				fmt.Fprintf(a.Stdout, "%s is %s: %d documents, %d chunks.\n", id, b.Status, b.Documents, b.Chunks)
			}
			if b.Failed > 0 {
				if !a.jsonOut {
					docs, err := c.KnowledgeDocuments(ctx, id)
					if err == nil {
						for _, d := range docs.Documents {
							if d.Error != "" && d.Status == "failed" {
								fmt.Fprintf(a.Stderr, "  failed: %s: %s\n", d.Source, d.Error)
							}
						}
					}
				}
				return silentFailure()
			}
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%s still indexing after %s: %w", id, runTimeout, ctx.Err())
		case <-time.After(KnowledgePollInterval):
		}
	}
}
