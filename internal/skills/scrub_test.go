package skills

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/agentryhq/agentry/internal/scrub"
)

// A skill script that prints a configured secret (on stdout as a result,
// on stderr as a failure) hands the model, and so the stored conversation,
// [REDACTED] instead (#42). Fails on the code before it: skill output was
// passed on as printed.
func TestSkillOutputIsScrubbed(t *testing.T) {
	const secret = "zz-skill-leaked-provider-key-42"
	src := scrub.Register("test")
	defer src.Close()
	src.Set(secret)
	ws := t.TempDir()
	writeSkill(t, ws, "leaky", map[string]string{
		"SKILL.md": "---\nname: leaky\ndescription: Prints a key.\ntools:\n  - name: show\n    description: show\n    script: show.sh\n  - name: fail\n    description: fail\n    script: fail.sh\n---\n",
		"show.sh":  "#!/bin/sh\necho \"the key is " + secret + "\"\n",
		"fail.sh":  "#!/bin/sh\necho \"bad key " + secret + "\" >&2\nexit 2\n",
	})
	r := NewRegistry([]string{ws}, nil)
	for _, tool := range []string{"show", "fail"} {
		res, err := r.Call(context.Background(), "skill__leaky__"+tool, json.RawMessage(`{}`))
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(res.Content, secret) || !strings.Contains(res.Content, scrub.Redacted) {
			t.Fatalf("%s: %+v", tool, res)
		}
	}
}
