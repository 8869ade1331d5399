package runner

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
)

// Resources bound a member's processes together, all of them, daemons it left running
// included: their CPU time, memory and number. A zero field is not bounded.
type Resources struct {
	// CPUs is how many CPUs' time the member may take (0.5: half of one).
	CPUs float64 `json:"cpus,omitempty"`
	// Memory is in bytes.
	Memory int64 `json:"memory,omitempty"`
	// PIDs bounds its processes and threads.
	PIDs int `json:"pids,omitempty"`
}

// Controllers names the controllers a Resources needs, in the order cpu, memory, pids.
func (r Resources) Controllers() []string {
	var need []string
	for _, c := range []struct {
		name string
		set  bool
	}{{"cpu", r.CPUs > 0}, {"memory", r.Memory > 0}, {"pids", r.PIDs > 0}} {
		if c.set {
			need = append(need, c.name)
		}
	}
	return need
}

// The resources of a member are bounded by its cgroup: in cgroup v2 (cpu.max, memory.max,
// pids.max on the member's cgroup, the controllers enabled down clusterflow's own tree),
// or, on a hybrid host whose v2 tree lacks a controller, in that controller's v1 hierarchy
// (a cgroup of the same path, which the script's wrapper is put in while held at its gate,
// before anything of the script runs).

// cpuPeriod is the period of a CPU quota, in microseconds: the kernel's default.
const cpuPeriod = 100000

// boundedBy says, for each controller, how this host bounds it: "v2", "v1", or "" when it
// cannot (no controller it may use).
var boundedBy = sync.OnceValue(func() map[string]string {
	by := map[string]string{}
	v2 := v2Controllers()
	for _, c := range []string{"cpu", "memory", "pids"} {
		switch {
		case slices.Contains(v2, c):
			by[c] = "v2"
		case v1Usable(c):
			by[c] = "v1"
		}
	}
	return by
})

// Unbounded lists the controllers r needs that this host cannot use.
func Unbounded(r Resources) []string {
	var missing []string
	for _, c := range r.Controllers() {
		if boundedBy()[c] == "" {
			missing = append(missing, c)
		}
	}
	return missing
}

// v2Controllers are the controllers clusterflow's cgroup v2 tree may enable below its base.
func v2Controllers() []string {
	base := CgroupBase()
	if base == "" {
		return nil
	}
	data, err := os.ReadFile(filepath.Join(base, "cgroup.controllers"))
	if err != nil {
		return nil
	}
	var usable []string
	for _, c := range strings.Fields(string(data)) {
		// Enabled in the base's subtree, or enableable there: it holds no process.
		if err := os.WriteFile(filepath.Join(base, "cgroup.subtree_control"), []byte("+"+c), 0); err == nil {
			usable = append(usable, c)
		}
	}
	return usable
}

// v1Root is where a controller's v1 hierarchy is mounted, by convention.
func v1Root(controller string) string { return filepath.Join("/sys/fs/cgroup", controller) }

// v1Usable says the controller's v1 hierarchy is mounted and this process may make cgroups
// in it.
func v1Usable(controller string) bool {
	root := v1Root(controller)
	if _, err := os.Stat(filepath.Join(root, "cgroup.procs")); err != nil {
		return false
	}
	if !isV1Of(root, controller) {
		return false
	}
	return usableCgroup(filepath.Join(root, "clusterflow"))
}

// isV1Of says root is a cgroup v1 mount holding the controller (from /proc/self/mountinfo).
func isV1Of(root, controller string) bool {
	data, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return false
	}
	for line := range strings.SplitSeq(string(data), "\n") {
		left, right, ok := strings.Cut(line, " - ")
		f := strings.Fields(left)
		if !ok || len(f) < 5 || f[4] != root || !strings.HasPrefix(right, "cgroup ") {
			continue
		}
		return slices.Contains(strings.Split(strings.Fields(right)[len(strings.Fields(right))-1], ","), controller)
	}
	return false
}

// v1Dir is the member's cgroup in a controller's v1 hierarchy: the same path below
// clusterflow/ as its v2 cgroup below the v2 base.
func v1Dir(controller, v2dir string) string {
	base := CgroupBase()
	rel, err := filepath.Rel(base, v2dir)
	if base == "" || err != nil || strings.HasPrefix(rel, "..") {
		return ""
	}
	return filepath.Join(v1Root(controller), "clusterflow", rel)
}

// bounded caches, by member cgroup (its v2 folder), the bounds last set on it: a member's
// checks and runs start many processes, each of which would otherwise write them again.
// RemoveBounds forgets a member's as its cgroups go.
var bounded sync.Map

// bound sets r on the member's cgroup (its v2 folder, dir): in v2, before any process is
// put there; in v1, it returns the cgroups pid must be put in before it runs anything.
func bound(dir string, r Resources) (v1 []string, err error) {
	if last, ok := bounded.Load(dir); ok && last.(Resources) == r {
		for _, c := range r.Controllers() {
			if boundedBy()[c] == "v1" {
				v1 = append(v1, v1Dir(c, dir))
			}
		}
		return v1, nil
	}
	defer func() {
		if err == nil {
			bounded.Store(dir, r)
		}
	}()
	for _, c := range r.Controllers() {
		switch boundedBy()[c] {
		case "v2":
			if err := enableV2(dir, c); err != nil {
				return nil, err
			}
			if err := writeLimit(dir, c, r, "v2"); err != nil {
				return nil, err
			}
		case "v1":
			d := v1Dir(c, dir)
			if d == "" {
				return nil, fmt.Errorf("no %s cgroup for %s", c, dir)
			}
			if err := os.MkdirAll(d, 0o755); err != nil {
				return nil, fmt.Errorf("make the member's %s cgroup: %w", c, err)
			}
			if err := writeLimit(d, c, r, "v1"); err != nil {
				return nil, err
			}
			v1 = append(v1, d)
		default:
			return nil, fmt.Errorf("this host cannot bound %s: no %s controller it may use, in cgroup v2 or v1", c, c)
		}
	}
	return v1, nil
}

// enableV2 enables the controller in every cgroup from the base down to the member's
// parent, which hold no process of their own.
func enableV2(dir, controller string) error {
	base := CgroupBase()
	rel, err := filepath.Rel(base, filepath.Dir(dir))
	if err != nil || strings.HasPrefix(rel, "..") {
		return fmt.Errorf("cgroup %s is not below %s", dir, base)
	}
	at := base
	for _, part := range append([]string{""}, strings.Split(rel, string(filepath.Separator))...) {
		at = filepath.Join(at, part)
		if err := os.MkdirAll(at, 0o755); err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join(at, "cgroup.subtree_control"), []byte("+"+controller), 0); err != nil {
			return fmt.Errorf("enable %s in cgroup %s: %w", controller, at, err)
		}
	}
	return os.MkdirAll(dir, 0o755)
}

// writeLimit writes the controller's limit in the cgroup folder.
func writeLimit(dir, controller string, r Resources, version string) error {
	var files map[string]string
	switch {
	case controller == "cpu" && version == "v2":
		files = map[string]string{"cpu.max": fmt.Sprintf("%d %d", int64(r.CPUs*cpuPeriod), cpuPeriod)}
	case controller == "cpu":
		files = map[string]string{"cpu.cfs_period_us": strconv.Itoa(cpuPeriod), "cpu.cfs_quota_us": strconv.FormatInt(int64(r.CPUs*cpuPeriod), 10)}
	case controller == "memory" && version == "v2":
		files = map[string]string{"memory.max": strconv.FormatInt(r.Memory, 10), "memory.swap.max": "0"}
	case controller == "memory":
		files = map[string]string{"memory.limit_in_bytes": strconv.FormatInt(r.Memory, 10)}
	case controller == "pids":
		files = map[string]string{"pids.max": strconv.Itoa(r.PIDs)}
	}
	for _, name := range []string{"cpu.cfs_period_us", "cpu.cfs_quota_us", "cpu.max", "memory.max", "memory.swap.max", "memory.limit_in_bytes", "pids.max"} {
		value, ok := files[name]
		if !ok {
			continue
		}
		if err := os.WriteFile(filepath.Join(dir, name), []byte(value), 0); err != nil && !(name == "memory.swap.max" && errors.Is(err, fs.ErrNotExist)) {
			return fmt.Errorf("bound the member's %s (%s): %w", controller, name, err)
		}
	}
	return nil
}

// joinV1 puts pid in each v1 cgroup.
func joinV1(pid int, dirs []string) error {
	for _, d := range dirs {
		if err := os.WriteFile(filepath.Join(d, "cgroup.procs"), []byte(strconv.Itoa(pid)), 0); err != nil {
			return fmt.Errorf("put the script in cgroup %s: %w", d, err)
		}
	}
	return nil
}

// RemoveBounds removes the v1 cgroups of a member's (or a cluster's) v2 cgroup dir, once
// nothing runs in them: KillCgroup has killed what ran in its v2 cgroup, which is all of it.
func RemoveBounds(dir string) error {
	if dir == "" {
		return nil
	}
	bounded.Range(func(key, _ any) bool {
		if k := key.(string); k == dir || strings.HasPrefix(k, dir+string(filepath.Separator)) {
			bounded.Delete(key)
		}
		return true
	})
	for _, c := range []string{"cpu", "memory", "pids"} {
		if boundedBy()[c] != "v1" {
			continue
		}
		d := v1Dir(c, dir)
		if d == "" {
			continue
		}
		if _, err := os.Stat(d); errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err := removeCgroups(d); err != nil && !errors.Is(err, syscall.EBUSY) {
			return err
		}
	}
	return nil
}

// BoundsOf reads back the bounds of the member's cgroup (its v2 folder, dir), wherever
// this host keeps them: what a member is held to, for tests and for status.
func BoundsOf(dir string) (Resources, error) {
	var r Resources
	// A controller's cgroup not made (nothing bound it) reads as unbounded.
	read := func(path string) (string, error) {
		data, err := os.ReadFile(path)
		if errors.Is(err, fs.ErrNotExist) {
			return "", nil
		}
		return strings.TrimSpace(string(data)), err
	}
	for _, c := range []string{"cpu", "memory", "pids"} {
		at := dir
		if boundedBy()[c] == "v1" {
			at = v1Dir(c, dir)
		}
		switch {
		case boundedBy()[c] == "":
			continue
		case c == "cpu" && boundedBy()[c] == "v2":
			v, err := read(filepath.Join(at, "cpu.max"))
			if err != nil {
				return r, err
			}
			if quota, _, ok := strings.Cut(v, " "); ok && quota != "max" {
				q, _ := strconv.ParseFloat(quota, 64)
				r.CPUs = q / cpuPeriod
			}
		case c == "cpu":
			v, err := read(filepath.Join(at, "cpu.cfs_quota_us"))
			if err != nil {
				return r, err
			}
			if q, _ := strconv.ParseFloat(v, 64); q > 0 {
				r.CPUs = q / cpuPeriod
			}
		case c == "memory":
			name := "memory.max"
			if boundedBy()[c] == "v1" {
				name = "memory.limit_in_bytes"
			}
			v, err := read(filepath.Join(at, name))
			if err != nil {
				return r, err
			}
			// v1 writes "no bound" as the largest page-aligned number.
			if m, err := strconv.ParseInt(v, 10, 64); err == nil && m < 1<<60 {
				r.Memory = m
			}
		case c == "pids":
			v, err := read(filepath.Join(at, "pids.max"))
			if err != nil {
				return r, err
			}
			r.PIDs, _ = strconv.Atoi(v)
		}
	}
	return r, nil
}
