package skills

import (
	"bufio"
	"bytes"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
)

// Verdicts of a scan, in rising order.
const (
	VerdictOK      = "ok"
	VerdictCaution = "caution"
	VerdictDanger  = "danger"
)

// Kinds of finding.
const (
	FindingRuns    = "runs"    // a program a script may start
	FindingNetwork = "network" // network access
	FindingFiles   = "files"   // files outside the skill folder
	FindingDanger  = "danger"  // a pattern that is never routine
)

// Finding is one thing the static scan saw, with where.
type Finding struct {
	Kind   string `json:"kind"`
	File   string `json:"file"`
	Line   int    `json:"line"`
	Detail string `json:"detail"`
}

// ScanReport is the static scan of a skill: what its scripts may run, what
// network they may reach, which files outside the folder they touch, and
// the verdict (danger always needs an interactive yes).
type ScanReport struct {
	Verdict  string    `json:"verdict"`
	Runs     []string  `json:"runs"`
	Network  []string  `json:"network"`
	Files    []string  `json:"files"`
	Findings []Finding `json:"findings"`
	Scripts  []string  `json:"scripts"`
}

// dangerRules are patterns with no routine use in a skill's script.
var dangerRules = []struct {
	re  *regexp.Regexp
	why string
}{
	{regexp.MustCompile(`(curl|wget)[^|;&]*\|\s*(sudo\s+)?(ba|z|da|k)?sh\b`), "pipes a download into a shell"},
	{regexp.MustCompile(`base64\s+(-d|--decode)[^|;&]*\|\s*(ba|z|da)?sh\b`), "decodes hidden code into a shell"},
	{regexp.MustCompile(`\brm\s+-[a-zA-Z]*[rf][a-zA-Z]*\s+(/|~|\$HOME)(\s|/?\*|$)`), "deletes the root or home folder"},
	{regexp.MustCompile(`\bsudo\b|\bsu\s+-`), "asks for root"},
	{regexp.MustCompile(`/dev/(tcp|udp)/`), "opens a raw network socket from the shell (reverse shell pattern)"},
	{regexp.MustCompile(`\b(nc|ncat|netcat)\b[^\n]*\s-[a-z]*e\b`), "netcat with -e (reverse shell pattern)"},
	{regexp.MustCompile(`\bmkfs\b|\bdd\s+[^\n]*of=/dev/`), "writes a disk device"},
	{regexp.MustCompile(`chmod\s+[ugo]*\+?[0-7]*s|chmod\s+[0-7]*[4-7][0-7]{3}\b`), "sets setuid/setgid bits"},
	{regexp.MustCompile(`\.ssh/(id_|authorized_keys)|\.aws/credentials|\.netrc|/etc/shadow|\.gnupg/`), "reads or writes credentials"},
	{regexp.MustCompile(`\bcrontab\b|/etc/cron|systemctl\s+enable|\.bashrc|\.profile\b`), "installs itself to run later"},
	{regexp.MustCompile(`\beval\s+["']?\$\((curl|wget)`), "evaluates downloaded code"},
}

var (
	urlRe  = regexp.MustCompile(`\b(https?|ftp|wss?)://[^\s"'<>()]+`)
	netCmd = map[string]bool{"curl": true, "wget": true, "nc": true, "ncat": true, "netcat": true, "ssh": true, "scp": true,
		"sftp": true, "rsync": true, "telnet": true, "ftp": true, "git": true, "ping": true, "dig": true, "nslookup": true}
	// netLib: network use from inside a script language.
	netLib = regexp.MustCompile(`\b(import\s+(socket|requests|urllib|http\.client|httpx|aiohttp)|from\s+(urllib|requests|http|socket)\b|require\(['"](https?|net|axios|node-fetch)['"]\)|\bfetch\(|LWP::|IO::Socket|Net::HTTP)`)
	// procLib: starting programs from inside a script language.
	procLib = regexp.MustCompile(`\b(subprocess\.|os\.system\(|os\.popen\(|child_process|exec\(|execSync\(|spawn\(|system\(|Popen\()`)
	// absPath: an absolute path, home or parent reference in a script.
	absPath  = regexp.MustCompile(`(^|[\s"'=:(>])((/(etc|home|root|usr|var|opt|tmp|srv|proc|sys|dev|mnt|run|boot)(/[^\s"';|&)]*)?)|~/[^\s"';|&)]*|\$HOME[^\s"';|&)]*|\$\{HOME\}[^\s"';|&)]*|\.\./[^\s"';|&)]*)`)
	assignRe = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*=`)
	// shellSplit cuts a shell line where a new program may start.
	shellSplit   = regexp.MustCompile(`\|\|?|&&|;|\$\(|` + "`" + `|\bthen\b|\bdo\b|\belse\b`)
	shellShebang = regexp.MustCompile(`\b(sh|bash|zsh|dash|ksh)\b`)
	// harmless are shell builtins and text tools not worth listing.
	harmless = map[string]bool{"echo": true, "printf": true, "cat": true, "read": true, "test": true, "[": true, "[[": true, "true": true,
		"false": true, "exit": true, "return": true, "set": true, "local": true, "export": true, "if": true, "then": true, "else": true,
		"elif": true, "fi": true, "for": true, "while": true, "do": true, "done": true, "case": true, "esac": true, "in": true, "shift": true,
		"}": true, "{": true, "function": true, "exec": true, "cd": true, "wait": true, "trap": true, "]": true, "]]": true, "!": true}
)

// Scan reads every script of the skill in dir (the tools' scripts and any
// other executable or script-like file) and reports what they may do.
func Scan(dir string) ScanReport {
	rep := ScanReport{Verdict: VerdictOK, Runs: []string{}, Network: []string{}, Files: []string{}, Findings: []Finding{}, Scripts: []string{}}
	runs, network, files := map[string]bool{}, map[string]bool{}, map[string]bool{}
	_ = filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			if d != nil && d.IsDir() && d.Name() == ".git" {
				return filepath.SkipDir
			}
			return nil
		}
		info, err := d.Info()
		if err != nil || !info.Mode().IsRegular() || !isScript(p, info.Mode()) {
			return nil
		}
		rel, _ := filepath.Rel(dir, p)
		rel = filepath.ToSlash(rel)
		data, err := os.ReadFile(p)
		if err != nil {
			return nil
		}
		rep.Scripts = append(rep.Scripts, rel)
		shell := isShell(p, data)
		sc := bufio.NewScanner(bytes.NewReader(data))
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		for n := 1; sc.Scan(); n++ {
			line := strings.TrimSpace(sc.Text())
			if line == "" || strings.HasPrefix(line, "#") || strings.HasPrefix(line, "//") {
				continue
			}
			add := func(kind, detail string) {
				rep.Findings = append(rep.Findings, Finding{Kind: kind, File: rel, Line: n, Detail: detail})
			}
			for _, r := range dangerRules {
				if r.re.MatchString(line) {
					add(FindingDanger, r.why+": "+clip(line))
				}
			}
			for _, u := range urlRe.FindAllString(line, -1) {
				network[u] = true
				add(FindingNetwork, u)
			}
			if netLib.MatchString(line) {
				network["network library: "+netLib.FindString(line)] = true
				add(FindingNetwork, clip(line))
			}
			for _, m := range absPath.FindAllStringSubmatch(line, -1) {
				files[m[2]] = true
				add(FindingFiles, m[2])
			}
			if shell {
				for _, c := range shellCommands(line) {
					runs[c] = true
					if netCmd[c] {
						network["command: "+c] = true
					}
				}
			} else if procLib.MatchString(line) {
				runs["(starts programs) "+clip(line)] = true
				add(FindingRuns, clip(line))
			}
		}
		return nil
	})
	rep.Runs, rep.Network, rep.Files = sortedKeys(runs), sortedKeys(network), sortedKeys(files)
	for _, f := range rep.Findings {
		if f.Kind == FindingDanger {
			rep.Verdict = VerdictDanger
			break
		}
	}
	if rep.Verdict == VerdictOK && (len(rep.Network) > 0 || len(rep.Files) > 0) {
		rep.Verdict = VerdictCaution
	}
	return rep
}

func isScript(path string, mode fs.FileMode) bool {
	if mode.Perm()&0o111 != 0 {
		return true
	}
	switch strings.ToLower(filepath.Ext(path)) {
	case ".sh", ".bash", ".zsh", ".py", ".js", ".mjs", ".ts", ".rb", ".pl", ".php", ".lua", ".ps1":
		return true
	}
	return false
}

func isShell(path string, data []byte) bool {
	switch filepath.Ext(path) {
	case ".sh", ".bash", ".zsh":
		return true
	}
	first, _, _ := bytes.Cut(data, []byte("\n"))
	return bytes.HasPrefix(first, []byte("#!")) && shellShebang.Match(first)
}

// shellCommands are the program names a shell line starts: the first word
// of every pipeline part and command substitution.
func shellCommands(line string) []string {
	var out []string
	for _, part := range shellSplit.Split(line, -1) {
		words := strings.Fields(part)
		// VAR=value and exec prefix the program that actually runs.
		for len(words) > 0 && (assignRe.MatchString(words[0]) || words[0] == "exec") {
			words = words[1:]
		}
		if len(words) == 0 {
			continue
		}
		w := strings.Trim(words[0], `"'(){}`)
		if w == "" || harmless[w] || strings.HasPrefix(w, "$") || strings.ContainsAny(w, "=<>") {
			continue
		}
		out = append(out, filepath.Base(w))
	}
	return out
}

func clip(s string) string {
	if r := []rune(s); len(r) > 120 {
		return string(r[:117]) + "..."
	}
	return s
}

func sortedKeys(m map[string]bool) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
