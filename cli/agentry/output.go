package agentry

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strings"
	"text/tabwriter"
	"time"

	"golang.org/x/term"
)

// Tables use text/tabwriter from the standard library: aligned columns
// without borders are what people read in a terminal and grep in scripts,
// and machine readers have --json, so a table library would add a
// dependency for no gain.

// printJSON writes raw JSON indented (what the gateway sent, as is).
func printJSON(w io.Writer, raw []byte) error {
	var buf bytes.Buffer
	if err := json.Indent(&buf, bytes.TrimSpace(raw), "", "  "); err != nil {
		// Not JSON after all: print it unchanged rather than fail.
		_, werr := fmt.Fprintln(w, strings.TrimSpace(string(raw)))
		return werr
	}
	buf.WriteByte('\n')
	_, err := w.Write(buf.Bytes())
	return err
}

// printValue writes a value the client built itself as indented JSON.
func printValue(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// table writes rows under a header with aligned columns.
func table(w io.Writer, header []string, rows [][]string) {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, strings.Join(header, "\t"))
	for _, r := range rows {
		for i := range r {
			// The last column is free to run long (details, errors):
			// nothing follows it that it could push out of line.
			r[i] = cell(r[i], i < len(r)-1)
		}
		fmt.Fprintln(tw, strings.Join(r, "\t"))
	}
	tw.Flush()
}

// cell keeps one table cell on one line and, when truncate is set, of a
// readable width.
func cell(s string, truncate bool) string {
	s = strings.Join(strings.Fields(s), " ")
	if s == "" {
		return "-"
	}
	if r := []rune(s); truncate && len(r) > 60 {
		return string(r[:57]) + "..."
	}
	return s
}

// keyValues writes "key: value" lines aligned.
func keyValues(w io.Writer, pairs [][2]string) {
	tw := tabwriter.NewWriter(w, 0, 4, 1, ' ', 0)
	for _, p := range pairs {
		v := p[1]
		if v == "" {
			v = "-"
		}
		fmt.Fprintf(tw, "%s:\t%s\n", p[0], v)
	}
	tw.Flush()
}

func yesNo(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}

func fmtTime(t *time.Time) string {
	if t == nil || t.IsZero() {
		return "-"
	}
	return t.Local().Format("2006-01-02 15:04:05")
}

// isTerminal reports whether r or w is an interactive terminal.
func isTerminal(f any) bool {
	file, ok := f.(*os.File)
	return ok && term.IsTerminal(int(file.Fd()))
}
