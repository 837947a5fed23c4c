package client

import (
	"context"
	"encoding/json"
	"net/http"
	"net/url"
)

// SkillTool is one tool of a skill.
type SkillTool struct {
	Name        string          `json:"name"`
	Description string          `json:"description"`
	Script      string          `json:"script"`
	Parameters  json.RawMessage `json:"parameters,omitempty"`
}

// Skill is GET /skills/{name}.
type Skill struct {
	Raw
	Name         string      `json:"name"`
	Description  string      `json:"description"`
	Version      string      `json:"version,omitempty"`
	Tools        []SkillTool `json:"tools"`
	Instructions string      `json:"instructions"`
	Dir          string      `json:"dir"`
	Digest       string      `json:"digest"`
}

// SkillSummary is a skill in GET /skills.
type SkillSummary struct {
	Name        string   `json:"name"`
	Description string   `json:"description"`
	Version     string   `json:"version,omitempty"`
	Tools       []string `json:"tools"`
	Dir         string   `json:"dir"`
	Digest      string   `json:"digest"`
}

// SkillList is GET /skills.
type SkillList struct {
	Raw
	Skills []SkillSummary `json:"skills"`
	Dirs   []string       `json:"dirs"`
}

// SkillRefusal is a folder a rescan did not load.
type SkillRefusal struct {
	Dir    string `json:"dir"`
	Name   string `json:"name,omitempty"`
	Reason string `json:"reason"`
}

// SkillRescan is POST /skills/rescan.
type SkillRescan struct {
	Raw
	Added   []string       `json:"added"`
	Changed []string       `json:"changed"`
	Removed []string       `json:"removed"`
	Refused []SkillRefusal `json:"refused"`
	Skills  int            `json:"skills"`
}

// SkillFinding is one thing the static scan saw.
type SkillFinding struct {
	Kind   string `json:"kind"`
	File   string `json:"file"`
	Line   int    `json:"line"`
	Detail string `json:"detail"`
}

// SkillDryRun is one tool's sandboxed run.
type SkillDryRun struct {
	Tool            string `json:"tool"`
	ExitCode        int    `json:"exit_code"`
	Stdout          string `json:"stdout"`
	Stderr          string `json:"stderr,omitempty"`
	TimedOut        bool   `json:"timed_out,omitempty"`
	Error           string `json:"error,omitempty"`
	DurationMS      int64  `json:"duration_ms"`
	NetworkIsolated bool   `json:"network_isolated"`
	Skipped         string `json:"skipped,omitempty"`
}

// SkillPlan is POST /skills/install: the review, and after an install
// the rescan.
type SkillPlan struct {
	Raw
	Name        string      `json:"name"`
	Description string      `json:"description"`
	Version     string      `json:"version,omitempty"`
	Source      string      `json:"source"`
	SourceKind  string      `json:"source_kind"`
	Digest      string      `json:"digest"`
	Tools       []SkillTool `json:"tools"`
	Scan        struct {
		Verdict  string         `json:"verdict"`
		Runs     []string       `json:"runs"`
		Network  []string       `json:"network"`
		Files    []string       `json:"files"`
		Findings []SkillFinding `json:"findings"`
		Scripts  []string       `json:"scripts"`
	} `json:"scan"`
	DryRun    []SkillDryRun `json:"dry_run"`
	Verdict   string        `json:"verdict"`
	Replaces  string        `json:"replaces,omitempty"`
	Installed bool          `json:"installed"`
	Dir       string        `json:"dir,omitempty"`
	Rescan    *SkillRescan  `json:"rescan,omitempty"`
}

// SkillInstallRequest is the body of POST /skills/install.
type SkillInstallRequest struct {
	Source       string `json:"source"`
	Digest       string `json:"digest,omitempty"`
	AcceptDanger bool   `json:"accept_danger,omitempty"`
}

// Skills lists the loaded skills.
func (c *Client) Skills(ctx context.Context) (*SkillList, error) {
	var l SkillList
	return &l, c.Do(ctx, http.MethodGet, "/skills", nil, &l)
}

// Skill is one skill.
func (c *Client) Skill(ctx context.Context, name string) (*Skill, error) {
	var s Skill
	return &s, c.Do(ctx, http.MethodGet, "/skills/"+url.PathEscape(name), nil, &s)
}

// RescanSkills hot-loads the skill folders.
func (c *Client) RescanSkills(ctx context.Context) (*SkillRescan, error) {
	var r SkillRescan
	return &r, c.Do(ctx, http.MethodPost, "/skills/rescan", map[string]any{}, &r)
}

// InstallSkill reviews (no digest) or installs (the reviewed digest) a skill.
func (c *Client) InstallSkill(ctx context.Context, req SkillInstallRequest) (*SkillPlan, error) {
	var p SkillPlan
	return &p, c.Do(ctx, http.MethodPost, "/skills/install", req, &p)
}
