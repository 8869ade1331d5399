package runner

import (
	"bytes"
	"os"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// KillTagged sends SIGKILL to every process whose environment holds the exact entry
// (e.g. "CLUSTERFLOW_MEMBER_DIR=/data/clusters/c/c-w-0"), so that services a startscript left
// running do not outlive the member they belong to. It returns how many it killed.
func KillTagged(entry string) int {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return 0
	}
	want := []byte(entry)
	self := os.Getpid()
	killed := 0
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == self {
			continue
		}
		environ, err := os.ReadFile("/proc/" + e.Name() + "/environ")
		if err != nil {
			continue
		}
		for _, kv := range bytes.Split(environ, []byte{0}) {
			if bytes.Equal(kv, want) {
				if syscall.Kill(pid, syscall.SIGKILL) == nil {
					killed++
				}
				break
			}
		}
	}
	return killed
}

// KillUser sends SIGKILL to every process that runs as uid (as its real, effective or
// saved user) and sweeps again until none is left or within passes, for a process may fork
// while it is swept. It returns the processes still left. Unlike its environment, a
// process cannot erase its user, nor take another without privileges, so this finds every
// process a script user started: daemons that cleared their environment or wrote over it
// (as Redis does for its process title) included.
func KillUser(uid uint32, within time.Duration) []int {
	deadline := time.Now().Add(within)
	for {
		pids := ProcessesOf(uid)
		if len(pids) == 0 || time.Now().After(deadline) {
			return pids
		}
		for _, pid := range pids {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// ProcessesOf lists the live processes (zombies, which can do nothing, aside) that run as
// uid, as their real, effective or saved user.
func ProcessesOf(uid uint32) []int {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	var pids []int
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		status, err := os.ReadFile("/proc/" + e.Name() + "/status")
		if err != nil {
			continue
		}
		if runsAs(status, uid) {
			pids = append(pids, pid)
		}
	}
	return pids
}

// runsAs reads a /proc/PID/status: whether the process is alive and uid is its real,
// effective or saved user.
func runsAs(status []byte, uid uint32) bool {
	want := strconv.FormatUint(uint64(uid), 10)
	mine := false
	for line := range bytes.Lines(status) {
		if state, ok := bytes.CutPrefix(line, []byte("State:")); ok {
			if s := bytes.TrimSpace(state); len(s) > 0 && (s[0] == 'Z' || s[0] == 'X') {
				return false
			}
		}
		if ids, ok := bytes.CutPrefix(line, []byte("Uid:")); ok {
			fields := strings.Fields(string(ids))
			for _, id := range fields[:min(3, len(fields))] {
				mine = mine || id == want
			}
		}
	}
	return mine
}
