package testenv

import (
	"bytes"
	"os"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/clusterflow/clusterflow/internal/runner"
	"github.com/clusterflow/clusterflow/internal/testlimit"
)

// MemberProcesses lists running processes started for members whose sandboxes lie under
// dataDir, found by the CLUSTERFLOW_MEMBER_DIR variable every startscript inherits.
func MemberProcesses(dataDir string) []int {
	want := []byte("CLUSTERFLOW_MEMBER_DIR=" + dataDir + "/")
	var pids []int
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		stat, _ := os.ReadFile("/proc/" + e.Name() + "/stat")
		if i := bytes.LastIndexByte(stat, ')'); i < 0 || bytes.HasPrefix(bytes.TrimSpace(stat[i+1:]), []byte("Z")) {
			continue // gone, or a zombie nobody reaped: not running
		}
		environ, _ := os.ReadFile("/proc/" + e.Name() + "/environ")
		for _, kv := range bytes.Split(environ, []byte{0}) {
			if bytes.HasPrefix(kv, want) {
				pids = append(pids, pid)
				break
			}
		}
	}
	return pids
}

// StopAll stops the agent serving dataDir, then every member process left under it; for
// test cleanups.
func StopAll(dataDir string) {
	StopAgent(dataDir)
	KillMemberProcesses(dataDir)
}

// StopAllAtEnd stops everything under dataDir (StopAll) when the test ends, or when a
// testlimit guard ends the test binary first.
func StopAllAtEnd(t testing.TB, dataDir string) {
	unregister := testlimit.OnAbort(func() { StopAll(dataDir) })
	t.Cleanup(func() {
		StopAll(dataDir)
		unregister()
	})
}

// KillMemberProcesses kills what MemberProcesses finds, and, for a data folder, whatever
// its members' cgroups hold (daemons that hid their environment).
func KillMemberProcesses(dataDir string) {
	for _, pid := range MemberProcesses(dataDir) {
		_ = syscall.Kill(pid, syscall.SIGKILL)
	}
	_ = runner.KillCgroup(runner.DataCgroup(dataDir), 5*time.Second)
}
