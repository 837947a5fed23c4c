package agentdef

import (
	"fmt"
	"slices"
	"sort"
	"strings"
)

// Peers: the agents an agent may delegate to (docs/teams.md). A definition
// checks its own list (ids, no self, no duplicates); the registry checks
// the lists against each other once every file is read (CheckPeers):
// a peer that no file defines and a delegation cycle are errors naming the
// file and line of the peers key, and the agents concerned are skipped like
// any other definition that fails validation.

// PeerToolPrefix starts the name of a peer's tool: ask_<peer id>.
const PeerToolPrefix = "ask_"

// PeerToolName is the tool the model calls to delegate to peer.
func PeerToolName(peer string) string { return PeerToolPrefix + peer }

// PeerOfTool is the peer a tool name delegates to.
func PeerOfTool(tool string) (string, bool) {
	if !strings.HasPrefix(tool, PeerToolPrefix) || len(tool) == len(PeerToolPrefix) {
		return "", false
	}
	return tool[len(PeerToolPrefix):], true
}

func (d *Definition) validatePeers() []FieldError {
	var p []FieldError
	seen := map[string]bool{}
	for _, id := range d.Peers {
		switch {
		case !idRe.MatchString(id):
			p = append(p, FieldError{Key: "peers", Msg: fmt.Sprintf("%q is not an agent id", id)})
		case id == d.ID:
			p = append(p, FieldError{Key: "peers", Msg: fmt.Sprintf("an agent cannot be its own peer (%q)", id)})
		case seen[id]:
			p = append(p, FieldError{Key: "peers", Msg: fmt.Sprintf("%q is listed twice", id)})
		}
		seen[id] = true
	}
	return p
}

// PeerError is a problem with an agent's peers found across files.
type PeerError struct{ FieldError }

// CheckPeers checks the peers of a set of definitions against each other
// and returns one error per agent whose peers are unknown or who is part
// of a delegation cycle, and the ids of those agents (the registry skips
// them). An agent that names a skipped agent is skipped in turn.
func CheckPeers(agents map[string]*Definition) (bad map[string]bool, errs []error) {
	bad = map[string]bool{}
	ids := make([]string, 0, len(agents))
	for id := range agents {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	report := func(d *Definition, format string, args ...any) {
		bad[d.ID] = true
		errs = append(errs, &PeerError{FieldError{File: d.File, Line: d.PeersLine, Key: "peers", Msg: fmt.Sprintf(format, args...)}})
	}
	// Cycles first, on the whole graph: every agent on one is reported.
	const (
		white = iota
		grey
		black
	)
	color := map[string]int{}
	var stack []string
	var visit func(id string)
	visit = func(id string) {
		color[id] = grey
		stack = append(stack, id)
		for _, p := range agents[id].Peers {
			if _, ok := agents[p]; !ok {
				continue
			}
			switch color[p] {
			case white:
				visit(p)
			case grey:
				i := slices.Index(stack, p)
				cycle := append(append([]string(nil), stack[i:]...), p)
				for _, member := range stack[i:] {
					if !bad[member] {
						report(agents[member], "delegation cycle %s", strings.Join(cycle, " -> "))
					}
				}
			}
		}
		stack = stack[:len(stack)-1]
		color[id] = black
	}
	for _, id := range ids {
		if color[id] == white {
			visit(id)
		}
	}
	// Unknown (or skipped) peers, until nothing changes.
	for changed := true; changed; {
		changed = false
		for _, id := range ids {
			d := agents[id]
			if bad[id] {
				continue
			}
			for _, p := range d.Peers {
				if _, ok := agents[p]; !ok {
					report(d, "unknown peer %q (no agent file defines it)", p)
					changed = true
					break
				}
				if bad[p] {
					report(d, "peer %q was skipped (see its error)", p)
					changed = true
					break
				}
			}
		}
	}
	return bad, errs
}
