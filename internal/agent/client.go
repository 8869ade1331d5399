package agent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/clusterflow/clusterflow/internal/profiling"
)

// Client calls the agent serving a folder, and starts that agent when none is running and
// it has a Command: whoever needs the agent starts it, unless the host runs it as a service
// of its own (see deploy/systemd), reached at Socket.
type Client struct {
	// Dir is the agent's folder.
	Dir string
	// Socket is the agent's socket (default SocketPath(Dir)).
	Socket string
	// Command starts an agent for Dir, e.g. ["clusterflow", "agent", "--dir", Dir].
	Command []string
	// Settings is the digest of the settings Command starts an agent with: an agent
	// answering this client's first request with other settings, left by an earlier worker,
	// is replaced. Later requests take the agent as it is: another worker sharing the data
	// folder (a migration's target, say) may have started it since, and two that replaced
	// each other's would never stop.
	Settings string
	settled  atomic.Bool

	// startMu makes concurrent launches that find no agent start one, not one each.
	startMu   sync.Mutex
	lastStart time.Time
}

// startWait bounds how long a launch waits for a freshly started agent to listen.
const startWait = 15 * time.Second

// keepAliveEvery is how often KeepAlive looks for a missing agent.
const keepAliveEvery = 2 * time.Second

// Launch hands a run to the agent.
func (c *Client) Launch(ctx context.Context, l Launch) (Reply, error) {
	l.Protocol = Protocol
	return c.exchange(ctx, request{Launch: l}, startWait+30*time.Second)
}

// Call runs a call of the host's backend in the agent. An error of a backend's own kind
// (backend.Fault) comes back as that kind.
func (c *Client) Call(ctx context.Context, call Call) (Reply, error) {
	return c.exchange(ctx, request{Call: &call}, startWait+callTimeout)
}

// exchange sends the request to the agent, starting one (or replacing one of an older
// protocol, or other settings) first if need be.
func (c *Client) exchange(ctx context.Context, req request, within time.Duration) (Reply, error) {
	ctx, cancel := context.WithTimeout(ctx, within)
	defer cancel()
	var waitingSince time.Time
	for wait := 10 * time.Millisecond; ; wait = min(wait*2, 500*time.Millisecond) {
		reply, err := c.sendRequest(ctx, req)
		otherSettings := c.Settings != "" && reply.Settings != "" && reply.Settings != c.Settings && len(c.Command) > 0 && !c.settled.Load()
		stale := reply.Protocol < Protocol || otherSettings
		if err == nil && stale && len(c.Command) == 0 {
			return reply, fmt.Errorf("the agent at %s speaks protocol %d, and this worker %d: restart the host's agent service with this version", c.socket(), reply.Protocol, Protocol)
		}
		if err == nil && stale {
			// An agent the version before this one left running, or one started with other
			// settings: it would refuse this request, or serve it as it once did. It hands
			// its runs over to a new one.
			if err := c.replace(ctx); err != nil {
				return reply, err
			}
			err = errStopping
		}
		if err == nil && reply.Error == errStopping.Error() {
			err = errStopping
		}
		if err == nil {
			c.settled.Store(true)
			c.answered()
			switch {
			case reply.Fault != nil:
				return reply, reply.Fault.Err(reply.Error)
			case reply.Refused:
				return reply, &RefusedError{Reason: reply.Error}
			case reply.Error != "":
				return reply, errors.New(reply.Error)
			}
			return reply, nil
		}
		if !errors.Is(err, syscall.ECONNREFUSED) && !errors.Is(err, syscall.ENOENT) && !errors.Is(err, errStopping) && !agentDied(err) {
			return reply, fmt.Errorf("agent at %s: %w", c.socket(), err)
		}
		if waitingSince.IsZero() {
			waitingSince = time.Now()
		}
		if err := c.startOnce(); err != nil {
			return reply, err
		}
		if time.Since(waitingSince) > startWait {
			if len(c.Command) == 0 {
				return reply, fmt.Errorf("no agent answers at %s (is the host's agent service, clusterflow-agent, running?)", c.socket())
			}
			return reply, fmt.Errorf("agent did not come up within %s; see %s", startWait, c.logPath())
		}
		select {
		case <-ctx.Done():
			return reply, ctx.Err()
		case <-time.After(wait):
		}
	}
}

// agentDied says the agent's connection ended before its reply: the agent died while it
// served the request. Every request is safe to send again (a launch is keyed by its run, and
// the backend's calls are idempotent, as activities retried by Temporal must be), so it is
// sent again to the next agent, rather than costing the activity one of its attempts.
func agentDied(err error) bool {
	return errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE)
}

// socket is where the agent listens.
func (c *Client) socket() string {
	if c.Socket != "" {
		return c.Socket
	}
	return SocketPath(c.Dir)
}

// Stop asks the agent to stop a workflow's runs of a member's event now. An agent that is
// not running has no run to stop.
func (c *Client) Stop(ctx context.Context, s Stop) (Reply, error) {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	reply, err := c.sendRequest(ctx, request{Stop: &s})
	switch {
	case errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, syscall.ENOENT):
		return Reply{Action: "stopped 0"}, nil
	case err != nil:
		return reply, fmt.Errorf("agent at %s: %w", c.socket(), err)
	case reply.Error != "":
		return reply, errors.New(reply.Error)
	}
	return reply, nil
}

func (c *Client) sendRequest(ctx context.Context, req request) (Reply, error) {
	conn, err := dial(ctx, c.socket())
	if err != nil {
		return Reply{}, err
	}
	defer conn.Close()
	if deadline, ok := ctx.Deadline(); ok {
		_ = conn.SetDeadline(deadline)
	}
	if err := json.NewEncoder(conn).Encode(req); err != nil {
		return Reply{}, err
	}
	var reply Reply
	if err := json.NewDecoder(conn).Decode(&reply); err != nil {
		return Reply{}, fmt.Errorf("read agent reply: %w", err)
	}
	return reply, nil
}

// Running reports whether an agent answers on the folder's socket.
func (c *Client) Running() bool {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	conn, err := dial(ctx, c.socket())
	if err != nil {
		return false
	}
	conn.Close()
	return true
}

// PID returns the process ID of the agent serving the folder, if one answers.
func (c *Client) PID() (int, bool) {
	data, err := os.ReadFile(filepath.Join(c.Dir, "agent.pid"))
	if err != nil || !c.Running() {
		return 0, false
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(data)))
	return pid, err == nil
}

// replace stops the agent answering (SIGTERM: its scripts carry on, and the next agent
// adopts them), and waits for it to go.
func (c *Client) replace(ctx context.Context) error {
	pid, ok := c.PID()
	if !ok {
		return nil
	}
	if err := syscall.Kill(pid, syscall.SIGTERM); err != nil {
		return fmt.Errorf("stop the agent of an older version (pid %d): %w", pid, err)
	}
	for deadline := time.Now().Add(startWait); c.Running(); time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) || ctx.Err() != nil {
			return fmt.Errorf("the agent of an older version (pid %d) did not stop within %s; see %s", pid, startWait, c.logPath())
		}
	}
	return nil
}

// KeepAlive restarts the agent whenever it is down while runs still need it (a run still
// going, or a result not yet delivered), until ctx ends. This is how a killed agent comes
// back without waiting for a heartbeat timeout and a relaunch.
func (c *Client) KeepAlive(ctx context.Context, every time.Duration) {
	tick := time.NewTicker(every)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		if entries, _ := os.ReadDir(filepath.Join(c.Dir, indexDir)); len(entries) > 0 {
			_ = c.startOnce()
		}
	}
}

// answered notes that an agent answered: the one last started is up, so should it die, the
// next is started at once rather than after startWait/3.
func (c *Client) answered() {
	c.startMu.Lock()
	c.lastStart = time.Time{}
	c.startMu.Unlock()
}

// startOnce starts an agent unless one answers, or one was started moments ago and may
// still be coming up, or this client starts none.
func (c *Client) startOnce() error {
	if len(c.Command) == 0 && c.Socket != "" {
		return nil // the host's agent service: it comes back by itself
	}
	c.startMu.Lock()
	defer c.startMu.Unlock()
	if time.Since(c.lastStart) < startWait/3 || c.Running() {
		return nil
	}
	c.lastStart = time.Now()
	return c.start()
}

// start launches an agent detached from the caller (its own session), with its output in
// the folder's log. If another agent wins the race for the lock, the spare one exits.
func (c *Client) start() error {
	if len(c.Command) == 0 {
		return fmt.Errorf("no agent is running for %s, and none can be started here", c.Dir)
	}
	if err := os.MkdirAll(c.Dir, 0o700); err != nil {
		return err
	}
	log, err := os.OpenFile(c.logPath(), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return err
	}
	defer log.Close()
	cmd := exec.Command(c.Command[0], c.Command[1:]...)
	cmd.Env = agentEnv()
	cmd.Stdout, cmd.Stderr = log, log
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start agent: %w", err)
	}
	go func() { _ = cmd.Wait() }()
	return nil
}

func dial(ctx context.Context, socket string) (net.Conn, error) {
	addr, done, err := socketAddress(socket)
	if err != nil {
		return nil, err
	}
	defer done()
	var d net.Dialer
	return d.DialContext(ctx, "unix", addr)
}

func (c *Client) logPath() string { return filepath.Join(c.Dir, "agent.log") }

// agentEnv is the little of the worker's environment the agent needs. The rest (the
// worker's Temporal credentials above all) stays out of /proc/<agent>/environ: the agent
// reads its connections from its folder, and each run's environment comes with its launch.
func agentEnv() []string {
	var env []string
	for _, k := range []string{"PATH", "LANG", "LC_ALL", "TZ", "TMPDIR", "GOGC", "GOMEMLIMIT", "GOTRACEBACK", profiling.DirEnv, FaultEnv} {
		if v, ok := os.LookupEnv(k); ok {
			env = append(env, k+"="+v)
		}
	}
	return env
}
