package runner

import (
	"bytes"
	"os"
	"strconv"
	"syscall"
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
