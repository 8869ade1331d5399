package agent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/clusterflow/clusterflow/internal/profiling"
)

// Client hands runs to the agent serving a folder, and starts that agent when none is
// running: whoever needs the agent starts it.
type Client struct {
	// Dir is the agent's folder.
	Dir string
	// Command starts an agent for Dir, e.g. ["clusterflow", "agent", "--dir", Dir].
	Command []string

	// startMu makes concurrent launches that find no agent start one, not one each.
	startMu   sync.Mutex
	lastStart time.Time
}

// startWait bounds how long a launch waits for a freshly started agent to listen.
const startWait = 15 * time.Second

// Launch hands a run to the agent.
func (c *Client) Launch(ctx context.Context, l Launch) (Reply, error) {
	ctx, cancel := context.WithTimeout(ctx, startWait+30*time.Second)
	defer cancel()
	l.Protocol = Protocol
	var waitingSince time.Time
	for wait := 10 * time.Millisecond; ; wait = min(wait*2, 500*time.Millisecond) {
		reply, err := c.send(ctx, l)
		if err == nil && reply.Protocol < Protocol {
			// An agent the version before this one left running: it would refuse this
			// launch, or run it as it once did. It hands its runs over to a new one.
			if err := c.replace(ctx); err != nil {
				return reply, err
			}
			err = errStopping
		}
		if err == nil && reply.Error == errStopping.Error() {
			err = errStopping
		}
		if err == nil {
			if reply.Refused {
				return reply, &RefusedError{Reason: reply.Error}
			}
			if reply.Error != "" {
				return reply, errors.New(reply.Error)
			}
			return reply, nil
		}
		if !errors.Is(err, syscall.ECONNREFUSED) && !errors.Is(err, syscall.ENOENT) && !errors.Is(err, errStopping) {
			return reply, fmt.Errorf("agent at %s: %w", SocketPath(c.Dir), err)
		}
		if waitingSince.IsZero() {
			waitingSince = time.Now()
		}
		if err := c.startOnce(); err != nil {
			return reply, err
		}
		if time.Since(waitingSince) > startWait {
			return reply, fmt.Errorf("agent did not come up within %s; see %s", startWait, c.logPath())
		}
		select {
		case <-ctx.Done():
			return reply, ctx.Err()
		case <-time.After(wait):
		}
	}
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
		return reply, fmt.Errorf("agent at %s: %w", SocketPath(c.Dir), err)
	case reply.Error != "":
		return reply, errors.New(reply.Error)
	}
	return reply, nil
}

func (c *Client) send(ctx context.Context, l Launch) (Reply, error) {
	return c.sendRequest(ctx, request{Launch: l})
}

func (c *Client) sendRequest(ctx context.Context, req request) (Reply, error) {
	conn, err := dial(ctx, c.Dir)
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
	conn, err := dial(ctx, c.Dir)
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

// startOnce starts an agent unless one answers, or one was started moments ago and may
// still be coming up.
func (c *Client) startOnce() error {
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

func dial(ctx context.Context, dir string) (net.Conn, error) {
	addr, done, err := socketAddress(dir)
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
	for _, k := range []string{"PATH", "LANG", "LC_ALL", "TZ", "TMPDIR", "GOGC", "GOMEMLIMIT", "GOTRACEBACK", profiling.DirEnv} {
		if v, ok := os.LookupEnv(k); ok {
			env = append(env, k+"="+v)
		}
	}
	return env
}
