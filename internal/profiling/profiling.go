// Package profiling serves Go's pprof endpoints when CLUSTERFLOW_PPROF_DIR names a folder,
// so that benchmarks can profile the server, the worker and the agent while they run.
// It is off by default and listens on loopback only: profiles reveal internals.
package profiling

import (
	"fmt"
	"net"
	"net/http"
	"net/http/pprof"
	"os"
	"path/filepath"
)

// DirEnv names the folder where each profiled process writes its address.
const DirEnv = "CLUSTERFLOW_PPROF_DIR"

// Start serves pprof on an ephemeral loopback port when DirEnv is set, and writes the
// address to <dir>/<command>-<pid>.addr. A failure is returned, never fatal to the caller.
func Start(command string) error {
	dir := os.Getenv(DirEnv)
	if dir == "" {
		return nil
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return fmt.Errorf("profiling: %w", err)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	go func() { _ = http.Serve(l, mux) }()
	name := filepath.Join(dir, fmt.Sprintf("%s-%d.addr", command, os.Getpid()))
	if err := os.WriteFile(name, []byte(l.Addr().String()), 0o600); err != nil {
		return fmt.Errorf("profiling: %w", err)
	}
	return nil
}
