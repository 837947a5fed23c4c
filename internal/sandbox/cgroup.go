package sandbox

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// cgroups is the cgroup hierarchy the jail puts each call in: v2 (one
// directory with pids and memory) or v1 (a pids and a memory directory).
type cgroups struct {
	kind  string   // "v2", "v1" or "" (none)
	roots []string // agentry-sandbox parents
	why   string   // why none
}

const cgroupName = "agentry-sandbox"

func detectCgroups(root string) cgroups {
	if root == "" {
		root = "/sys/fs/cgroup"
	}
	if _, err := os.Stat(filepath.Join(root, "cgroup.controllers")); err == nil {
		parent := filepath.Join(root, cgroupName)
		if err := os.MkdirAll(parent, 0o755); err != nil {
			return cgroups{why: "cgroup v2 is not writable: " + err.Error()}
		}
		// The controllers must be delegated to our subtree.
		_ = os.WriteFile(filepath.Join(root, "cgroup.subtree_control"), []byte("+pids +memory"), 0o644)
		if err := os.WriteFile(filepath.Join(parent, "cgroup.subtree_control"), []byte("+pids +memory"), 0o644); err != nil {
			return cgroups{why: "cgroup v2: cannot delegate pids and memory: " + err.Error()}
		}
		c := cgroups{kind: "v2", roots: []string{parent}}
		return c.probe()
	}
	pids, mem := filepath.Join(root, "pids", cgroupName), filepath.Join(root, "memory", cgroupName)
	for _, d := range []string{pids, mem} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return cgroups{why: "cgroup v1 pids/memory not writable: " + err.Error()}
		}
	}
	c := cgroups{kind: "v1", roots: []string{pids, mem}}
	return c.probe()
}

// probe creates and removes one cgroup with limits.
func (c cgroups) probe() cgroups {
	cg, err := c.create(DefaultCaps())
	if err != nil {
		return cgroups{why: fmt.Sprintf("cgroup %s: %v", c.kind, err)}
	}
	cg.remove()
	return c
}

// cgroup is one call's cgroup (nil when cgroups are not in force; every
// method is safe on nil).
type cgroup struct {
	kind string
	dirs []string
}

func (c cgroups) create(caps Caps) (*cgroup, error) {
	id := newID()
	cg := &cgroup{kind: c.kind}
	for _, r := range c.roots {
		d := filepath.Join(r, id)
		if err := os.Mkdir(d, 0o755); err != nil {
			cg.remove()
			return nil, err
		}
		cg.dirs = append(cg.dirs, d)
	}
	var writes [][2]string
	if c.kind == "v2" {
		d := cg.dirs[0]
		writes = [][2]string{{filepath.Join(d, "pids.max"), strconv.Itoa(caps.Processes)},
			{filepath.Join(d, "memory.max"), strconv.FormatInt(caps.MemoryBytes, 10)},
			{filepath.Join(d, "memory.swap.max"), "0"}}
	} else {
		writes = [][2]string{{filepath.Join(cg.dirs[0], "pids.max"), strconv.Itoa(caps.Processes)},
			{filepath.Join(cg.dirs[1], "memory.limit_in_bytes"), strconv.FormatInt(caps.MemoryBytes, 10)}}
	}
	for i, w := range writes {
		if err := os.WriteFile(w[0], []byte(w[1]), 0o644); err != nil && !(c.kind == "v2" && i == 2) {
			cg.remove()
			return nil, err
		}
	}
	return cg, nil
}

func (cg *cgroup) procFiles() []string {
	if cg == nil {
		return nil
	}
	out := make([]string, len(cg.dirs))
	for i, d := range cg.dirs {
		out[i] = filepath.Join(d, "cgroup.procs")
	}
	return out
}

// kill SIGKILLs every process in the cgroup until it is empty.
func (cg *cgroup) kill() {
	if cg == nil {
		return
	}
	if cg.kind == "v2" {
		_ = os.WriteFile(filepath.Join(cg.dirs[0], "cgroup.kill"), []byte("1"), 0o644)
	}
	for range 50 {
		pids := cg.pids()
		if len(pids) == 0 {
			return
		}
		for _, pid := range pids {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func (cg *cgroup) pids() []int {
	var out []int
	for _, d := range cg.dirs[:1] {
		b, _ := os.ReadFile(filepath.Join(d, "cgroup.procs"))
		for _, f := range strings.Fields(string(b)) {
			if pid, err := strconv.Atoi(f); err == nil {
				out = append(out, pid)
			}
		}
	}
	return out
}

// Procs is how many processes are in the cgroup (tests: no orphans).
func (cg *cgroup) procs() int {
	if cg == nil {
		return 0
	}
	return len(cg.pids())
}

// hit reports the cap the cgroup counted (pids.max or the memory limit).
func (cg *cgroup) hit() Cap {
	if cg == nil {
		return CapNone
	}
	if n := eventCount(filepath.Join(cg.dirs[0], "pids.events"), "max"); n > 0 {
		return CapProcesses
	}
	if cg.kind == "v2" {
		if eventCount(filepath.Join(cg.dirs[0], "memory.events"), "oom_kill") > 0 || eventCount(filepath.Join(cg.dirs[0], "memory.events"), "max") > 0 {
			return CapMemory
		}
	} else if b, err := os.ReadFile(filepath.Join(cg.dirs[1], "memory.failcnt")); err == nil && strings.TrimSpace(string(b)) != "0" {
		return CapMemory
	}
	return CapNone
}

func eventCount(file, key string) int {
	b, err := os.ReadFile(file)
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		k, v, ok := strings.Cut(strings.TrimSpace(line), " ")
		if ok && k == key {
			n, _ := strconv.Atoi(strings.TrimSpace(v))
			return n
		}
	}
	return 0
}

// remove deletes the cgroup (after kill).
func (cg *cgroup) remove() {
	if cg == nil {
		return
	}
	for _, d := range cg.dirs {
		for range 20 {
			err := os.Remove(d)
			if err == nil || errors.Is(err, os.ErrNotExist) {
				break
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
}
