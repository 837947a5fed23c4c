package toolgrant

import "testing"

func TestNamesAndGrants(t *testing.T) {
	for id, ok := range map[string]bool{"github": true, "a_b-c": true, "a__b": false, "": false, "-a": false, "A": false} {
		if ValidMCPServerID(id) != ok {
			t.Errorf("ValidMCPServerID(%q) = %v", id, !ok)
		}
	}
	for name, ok := range map[string]bool{"pdf-tools": true, "a--b": false, "a_b": false, "": false} {
		if ValidSkillName(name) != ok {
			t.Errorf("ValidSkillName(%q) = %v", name, !ok)
		}
	}
	if MCP("*") != "mcp__*" || MCP("gh") != "mcp__gh__*" || Skill("pdf") != "skill__pdf__*" {
		t.Fatal("grants")
	}
}
