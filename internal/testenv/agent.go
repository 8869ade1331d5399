package testenv

import (
	"bytes"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// AgentPID returns the PID of the agent serving the local backend under dataDir, if one
// is running.
func AgentPID(dataDir string) (int, bool) {
	data, err := os.ReadFile(filepath.Join(dataDir, "agent", "agent.pid"))
	if err != nil {
		return 0, false
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(data)))
	if err != nil {
		return 0, false
	}
	cmdline, _ := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cmdline")
	stat, _ := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if !bytes.Contains(cmdline, []byte("\x00agent\x00")) || bytes.Contains(stat, []byte(") Z ")) {
		return 0, false // the PID file outlived its agent
	}
	return pid, true
}

// StopAgent kills the agent under dataDir and waits for it to go; for test cleanups. The
// agent is detached from the worker that started it, so nothing else stops it.
func StopAgent(dataDir string) {
	pid, ok := AgentPID(dataDir)
	if !ok {
		return
	}
	_ = syscall.Kill(pid, syscall.SIGKILL)
	for end := time.Now().Add(5 * time.Second); time.Now().Before(end); time.Sleep(20 * time.Millisecond) {
		if _, ok := AgentPID(dataDir); !ok {
			return
		}
	}
}
