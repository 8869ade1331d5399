// Package testenv gives integration tests and benchmarks the real thing: an embedded Temporal
// server, the clusterflow binary built from this checkout, and processes run from it.
package testenv

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/contrib/envconfig"

	"github.com/clusterflow/clusterflow/internal/devserver"
	"github.com/clusterflow/clusterflow/internal/testlimit"
	"github.com/clusterflow/clusterflow/starter"
	"github.com/clusterflow/clusterflow/workflows"
)

// Server is an in-memory Temporal server with clusterflow's search attributes registered.
type Server struct {
	*devserver.Server
	Client client.Client
}

// ServerOption changes how StartServer sets the server up.
type ServerOption func(*devserver.Options)

// WithoutSearchAttributes leaves clusterflow's search attributes unregistered, as on a
// fresh server.
func WithoutSearchAttributes() ServerOption {
	return func(o *devserver.Options) { o.SearchAttributes = nil }
}

// WithTLS makes the server require mutual TLS; Server.Client is then nil.
func WithTLS(t devserver.TLS) ServerOption {
	return func(o *devserver.Options) { o.TLS = &t }
}

// WithAPIKey makes the server require the API key (it needs WithTLS too).
func WithAPIKey(key string) ServerOption {
	return func(o *devserver.Options) { o.APIKey = key }
}

// StartServer starts a throwaway in-memory server on a free loopback port, with
// clusterflow's search attributes registered.
func StartServer(opts ...ServerOption) (*Server, error) {
	o := devserver.Options{Address: "127.0.0.1:0", SearchAttributes: workflows.SearchAttributeTypes()}
	for _, opt := range opts {
		opt(&o)
	}
	srv, err := devserver.Start(o)
	if err != nil {
		return nil, err
	}
	if o.TLS != nil {
		return &Server{Server: srv}, nil
	}
	c, err := Dial(srv.Address())
	if err != nil {
		srv.Stop()
		return nil, err
	}
	return &Server{Server: srv, Client: c}, nil
}

// Dial connects a quiet client to a server started by another process: with the client
// certificate of a dev server at that address, as the CLI would (starter.DevProfilePath).
func Dial(address string) (client.Client, error) {
	co, err := ClientOptions(address)
	if err != nil {
		return nil, err
	}
	return client.Dial(co)
}

// ClientOptions are a quiet client's options for the server at address, with no codec:
// what Dial uses, for a caller that adds to them.
func ClientOptions(address string) (client.Options, error) {
	p, err := starter.Settings(starter.ConnectOptions{Address: address})
	if err != nil {
		return client.Options{}, err
	}
	co, err := p.ToClientOptions(envconfig.ToClientOptionsRequest{})
	co.Logger = quietLogger{}
	return co, err
}

// Stop closes the client and the server.
func (s *Server) Stop() {
	if s.Client != nil {
		s.Client.Close()
	}
	_ = s.Server.Stop()
}

var (
	buildOnce sync.Once
	binDir    string
	buildErr  error
)

// Binary builds cmd/clusterflow (and cmd/clusterflow-host and cmd/clusterflow-dev, which
// its `dev` runs, beside it) from this checkout once per test process and returns its path.
func Binary() (string, error) {
	buildOnce.Do(build)
	return filepath.Join(binDir, "clusterflow"), buildErr
}

// HostBinary is cmd/clusterflow-host, built with Binary: what a fleet's hosts run.
func HostBinary() (string, error) {
	buildOnce.Do(build)
	return filepath.Join(binDir, "clusterflow-host"), buildErr
}

func build() {
	root, err := ModuleRoot()
	if err != nil {
		buildErr = err
		return
	}
	if binDir, err = os.MkdirTemp("", "clusterflow-bin-"); err != nil {
		buildErr = err
		return
	}
	cmd := exec.Command("go", "build", "-o", binDir+string(filepath.Separator), "./cmd/clusterflow", "./cmd/clusterflow-host", "./cmd/clusterflow-dev")
	cmd.Dir = root
	if out, err := cmd.CombinedOutput(); err != nil {
		buildErr = fmt.Errorf("go build ./cmd/clusterflow ./cmd/clusterflow-host ./cmd/clusterflow-dev: %v\n%s", err, out)
	}
}

// ModuleRoot is the folder holding go.mod.
func ModuleRoot() (string, error) {
	out, err := exec.Command("go", "env", "GOMOD").Output()
	if err != nil {
		return "", fmt.Errorf("go env GOMOD: %w", err)
	}
	gomod := strings.TrimSpace(string(out))
	if gomod == "" || gomod == os.DevNull {
		return "", fmt.Errorf("not inside the clusterflow module")
	}
	return filepath.Dir(gomod), nil
}

// Result is a finished CLI run.
type Result struct {
	Stdout, Stderr string
	Code           int
}

func (r Result) String() string {
	return fmt.Sprintf("exit %d\nstdout:\n%s\nstderr:\n%s", r.Code, r.Stdout, r.Stderr)
}

// RunLimit bounds a CLI call whose context has no deadline of its own.
const RunLimit = 2 * time.Minute

// Run runs the binary to completion with extra environment variables, in dir. It is killed
// when ctx ends, or after RunLimit if ctx has no deadline: no call can hang a test.
func Run(ctx context.Context, dir string, env []string, args ...string) (Result, error) {
	bin, err := Binary()
	if err != nil {
		return Result{}, err
	}
	return RunBinary(ctx, bin, dir, env, args...)
}

// RunBinary is Run with another binary: a copy of clusterflow elsewhere, say.
func RunBinary(ctx context.Context, bin, dir string, env []string, args ...string) (Result, error) {
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, RunLimit)
		defer cancel()
	}
	var stdout, stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Dir, cmd.Env = dir, append(os.Environ(), env...)
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	// A child the CLI left holding its output open must not keep Run waiting once it is killed.
	cmd.WaitDelay = 5 * time.Second
	err := cmd.Run()
	if ctx.Err() != nil {
		return Result{Stdout: stdout.String(), Stderr: stderr.String(), Code: -1},
			fmt.Errorf("clusterflow %s: killed, still running when its deadline passed (%v)\nstdout:\n%s\nstderr:\n%s", strings.Join(args, " "), ctx.Err(), stdout.String(), stderr.String())
	}
	res := Result{Stdout: stdout.String(), Stderr: stderr.String(), Code: cmd.ProcessState.ExitCode()}
	if _, isExit := err.(*exec.ExitError); err != nil && !isExit {
		return res, err
	}
	return res, nil
}

// Process is a clusterflow process running in the background, its output going to files
// (never to the test's own stdout or stderr, which would keep `go test` waiting).
type Process struct {
	cmd    *exec.Cmd
	Stdout string
	Stderr string
	done   chan struct{}
	err    error
}

// Start starts the binary in the background; logDir receives its stdout and stderr files.
func Start(dir, logDir, name string, env []string, args ...string) (*Process, error) {
	return StartIn("", dir, logDir, name, env, args...)
}

// StartIn is Start inside a network namespace (a test host's), or in the test's own when
// namespace is empty.
func StartIn(namespace, dir, logDir, name string, env []string, args ...string) (*Process, error) {
	bin, err := Binary()
	if err != nil {
		return nil, err
	}
	return startBinary(bin, namespace, dir, logDir, name, env, args...)
}

// StartHost is StartIn with cmd/clusterflow-host, the binary a fleet's hosts run.
func StartHost(namespace, dir, logDir, name string, env []string, args ...string) (*Process, error) {
	bin, err := HostBinary()
	if err != nil {
		return nil, err
	}
	return startBinary(bin, namespace, dir, logDir, name, env, args...)
}

func startBinary(bin, namespace, dir, logDir, name string, env []string, args ...string) (*Process, error) {
	cmd := exec.Command(bin, args...)
	if namespace != "" {
		// nsenter execs the binary in place, so signals reach it and its exit is the
		// process's. It enters the network namespace alone: ip netns exec would also
		// remount /sys, hiding the cgroup2 mount that members' cgroups are made in.
		cmd = exec.Command("nsenter", append([]string{"--net=/run/netns/" + namespace, bin}, args...)...)
	}
	cmd.Dir, cmd.Env = dir, append(os.Environ(), env...)
	return StartCommand(cmd, logDir, name)
}

// StartCommand starts cmd, as it is (its environment and all), in the background, with its
// output in logDir/NAME.stdout and .stderr.
func StartCommand(cmd *exec.Cmd, logDir, name string) (*Process, error) {
	p := &Process{Stdout: filepath.Join(logDir, name+".stdout"), Stderr: filepath.Join(logDir, name+".stderr"), done: make(chan struct{}), cmd: cmd}
	stdout, err := os.Create(p.Stdout)
	if err != nil {
		return nil, err
	}
	stderr, err := os.Create(p.Stderr)
	if err != nil {
		stdout.Close()
		return nil, err
	}
	p.cmd.Stdout, p.cmd.Stderr = stdout, stderr
	if p.cmd.SysProcAttr == nil {
		p.cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	// Dies with the test process even if the test is killed.
	p.cmd.SysProcAttr.Pdeathsig = syscall.SIGKILL
	if err := p.cmd.Start(); err != nil {
		stdout.Close()
		stderr.Close()
		return nil, err
	}
	// Should a guard end the test binary, the process goes with it.
	unregister := testlimit.OnAbort(func() { _ = p.cmd.Process.Kill() })
	go func() {
		p.err = p.cmd.Wait()
		unregister()
		stdout.Close()
		stderr.Close()
		close(p.done)
	}()
	return p, nil
}

// Pid is the process's ID.
func (p *Process) Pid() int { return p.cmd.Process.Pid }

// Output reads what the process printed so far.
func (p *Process) Output() string {
	out, _ := os.ReadFile(p.Stdout)
	errOut, _ := os.ReadFile(p.Stderr)
	return "stdout:\n" + string(out) + "\nstderr:\n" + string(errOut)
}

// WaitFor waits until the process prints text on stdout or stderr.
func (p *Process) WaitFor(text string, limit time.Duration) error {
	deadline := time.Now().Add(limit)
	for time.Now().Before(deadline) {
		if p.printed(text) {
			return nil
		}
		select {
		case <-p.done:
			// It may have printed the text between the read above and its exit.
			if p.printed(text) {
				return nil
			}
			return fmt.Errorf("process exited before printing %q: %v\n%s", text, p.err, p.Output())
		case <-time.After(50 * time.Millisecond):
		}
	}
	return fmt.Errorf("%q not printed within %s\n%s", text, limit, p.Output())
}

func (p *Process) printed(text string) bool {
	out, _ := os.ReadFile(p.Stdout)
	errOut, _ := os.ReadFile(p.Stderr)
	return bytes.Contains(out, []byte(text)) || bytes.Contains(errOut, []byte(text))
}

// Wait waits up to limit for the process to exit by itself, killing it after, and returns
// its exit code.
func (p *Process) Wait(limit time.Duration) (int, error) { return p.Signal(0, limit) }

// Signal sends a signal and waits up to limit for the process to exit, killing it after.
// Signal 0 sends nothing.
// It returns the exit code (-1 when killed).
func (p *Process) Signal(sig syscall.Signal, limit time.Duration) (int, error) {
	_ = p.cmd.Process.Signal(sig)
	select {
	case <-p.done:
		return p.cmd.ProcessState.ExitCode(), nil
	case <-time.After(limit):
		_ = p.cmd.Process.Kill()
		<-p.done
		return -1, fmt.Errorf("did not exit within %s of %s", limit, sig)
	}
}

// Stop ends the process however it can; for cleanups.
func (p *Process) Stop() {
	select {
	case <-p.done:
	default:
		_, _ = p.Signal(syscall.SIGTERM, 10*time.Second)
	}
}

// quietLogger drops the SDK client's logs in tests.
type quietLogger struct{}

func (quietLogger) Debug(string, ...any) {}
func (quietLogger) Info(string, ...any)  {}
func (quietLogger) Warn(string, ...any)  {}
func (quietLogger) Error(string, ...any) {}
