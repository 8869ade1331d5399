package runner

import (
	"errors"
	"os"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// waitGroupGone polls until no live process is left in the group, or the limit passes.
func waitGroupGone(pgid int, limit time.Duration) {
	for end := time.Now().Add(limit); time.Now().Before(end); time.Sleep(20 * time.Millisecond) {
		if !groupAlive(pgid) {
			return
		}
	}
}

// groupAlive reports whether any process of the group is still running. Zombies do not
// count: when PID 1 does not reap orphans (as in some containers) they linger forever but
// run nothing.
func groupAlive(pgid int) bool {
	if pgid < 2 {
		return false // no script's group: -1 and 0 name every process and the caller's group
	}
	if err := syscall.Kill(-pgid, 0); errors.Is(err, syscall.ESRCH) {
		return false
	}
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return true // no /proc to look closer; the group exists
	}
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if state, group, ok := procState(pid); ok && group == pgid && state != "Z" {
			return true
		}
	}
	return false
}

// Descendants lists root and every process below it, root first, by each process's
// parent: a tree that is not a group of the caller's (a container's exec, whose ID on the
// host the engine gives) is found so.
func Descendants(root int) []int {
	children := map[int][]int{}
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if fields, ok := statFields(pid); ok && len(fields) > 1 {
			if ppid, err := strconv.Atoi(fields[1]); err == nil {
				children[ppid] = append(children[ppid], pid)
			}
		}
	}
	tree := []int{root}
	for i := 0; i < len(tree); i++ {
		tree = append(tree, children[tree[i]]...)
	}
	return tree
}

// procState reads a process's state letter and process group from /proc/PID/stat.
func procState(pid int) (state string, pgid int, ok bool) {
	fields, ok := statFields(pid)
	if !ok || len(fields) < 3 {
		return "", 0, false
	}
	pgid, err := strconv.Atoi(fields[2])
	return fields[0], pgid, err == nil
}

// statFields returns the fields of /proc/PID/stat after the command name, starting with
// the state letter.
func statFields(pid int) ([]string, bool) {
	data, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return nil, false
	}
	// The command name is in parentheses and may contain spaces; fields follow the last ')'.
	text := string(data)
	return strings.Fields(text[strings.LastIndexByte(text, ')')+1:]), true
}
