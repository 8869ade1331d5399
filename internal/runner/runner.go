// Package runner runs one startscript as its own process group, with output to files, a
// timeout, cancellation with a grace period, and progress while it runs.
package runner

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"syscall"
	"time"
)

// Command is one script run.
type Command struct {
	Path string
	Args []string
	Dir  string
	Env  []string
	// StdoutFile and StderrFile receive the output; they are appended to, and the tails
	// cover only this run.
	StdoutFile, StderrFile string
	Timeout                time.Duration
	// Grace is how long a script has between SIGTERM and SIGKILL.
	Grace time.Duration
	// ProgressEvery is how often OnProgress is called while the script runs.
	ProgressEvery time.Duration
	OnProgress    func(Progress)
}

// Progress is what a running script shows of itself.
type Progress struct {
	Elapsed  time.Duration `json:"elapsed"`
	LastLine string        `json:"lastLine,omitempty"`
}

// Outcome says how a run ended.
type Outcome string

const (
	Exited   Outcome = "exited"
	TimedOut Outcome = "timed_out"
	Canceled Outcome = "canceled"
)

// Result is a finished run.
type Result struct {
	Outcome    Outcome       `json:"outcome"`
	ExitCode   int           `json:"exitCode"`
	Duration   time.Duration `json:"duration"`
	StdoutTail string        `json:"stdoutTail"`
	StderrTail string        `json:"stderrTail"`
}

// TailSize is how much of each output stream a result keeps.
const TailSize = 4 << 10

// Run starts the script and waits for it. The error is for failures to run at all; a
// script that fails, times out or is cancelled returns a Result saying so.
func Run(ctx context.Context, c Command) (Result, error) {
	stdout, err := openLog(c.StdoutFile)
	if err != nil {
		return Result{}, err
	}
	defer stdout.Close()
	stderr, err := openLog(c.StderrFile)
	if err != nil {
		return Result{}, err
	}
	defer stderr.Close()

	cmd := exec.Command(c.Path, c.Args...)
	cmd.Dir, cmd.Env = c.Dir, c.Env
	cmd.Stdout, cmd.Stderr = stdout.file, stderr.file
	// Its own process group, so that a timeout or cancel reaches everything it started.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	start := time.Now()
	if err := startRetryingBusy(cmd); err != nil {
		return Result{}, fmt.Errorf("start %s: %w", c.Path, err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()

	progressEvery := c.ProgressEvery
	if progressEvery <= 0 {
		progressEvery = time.Second
	}
	ticker := time.NewTicker(progressEvery)
	defer ticker.Stop()
	deadline := time.NewTimer(c.Timeout)
	defer deadline.Stop()

	result := Result{Outcome: Exited}
	var waitErr error
loop:
	for {
		select {
		case waitErr = <-exited:
			break loop
		case <-ticker.C:
			if c.OnProgress != nil {
				c.OnProgress(Progress{Elapsed: time.Since(start), LastLine: lastLine(stdout, stderr)})
			}
		case <-deadline.C:
			result.Outcome = TimedOut
			waitErr = stopGroup(cmd.Process.Pid, exited, c.Grace)
			break loop
		case <-ctx.Done():
			result.Outcome = Canceled
			waitErr = stopGroup(cmd.Process.Pid, exited, c.Grace)
			break loop
		}
	}
	result.Duration = time.Since(start)
	result.ExitCode = exitCode(waitErr)
	result.StdoutTail, result.StderrTail = stdout.tail(), stderr.tail()
	return result, nil
}

// stopGroup sends SIGTERM to the whole group, gives the group the grace period to exit,
// then sends SIGKILL to whatever is left. It returns the script's wait error.
func stopGroup(pgid int, exited <-chan error, grace time.Duration) error {
	_ = syscall.Kill(-pgid, syscall.SIGTERM)
	var waitErr error
	scriptDone := false
	for deadline := time.Now().Add(grace); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if !scriptDone {
			select {
			case waitErr = <-exited:
				scriptDone = true
			default:
			}
		}
		if scriptDone && !groupAlive(pgid) {
			return waitErr
		}
	}
	_ = syscall.Kill(-pgid, syscall.SIGKILL)
	if !scriptDone {
		waitErr = <-exited
	}
	waitGroupGone(pgid, 2*time.Second)
	return waitErr
}

// startRetryingBusy starts the command, retrying briefly on ETXTBSY: a script installed a
// moment ago can still be open for writing in a child forked meanwhile (golang/go#22315).
func startRetryingBusy(cmd *exec.Cmd) error {
	for attempt := 0; ; attempt++ {
		err := cmd.Start()
		if !errors.Is(err, syscall.ETXTBSY) || attempt == 20 {
			return err
		}
		time.Sleep(10 * time.Millisecond)
		fresh := exec.Command(cmd.Path, cmd.Args[1:]...)
		fresh.Dir, fresh.Env, fresh.Stdout, fresh.Stderr, fresh.SysProcAttr = cmd.Dir, cmd.Env, cmd.Stdout, cmd.Stderr, cmd.SysProcAttr
		*cmd = *fresh
	}
}

func exitCode(err error) int {
	if err == nil {
		return 0
	}
	var exit *exec.ExitError
	if errors.As(err, &exit) {
		if status, ok := exit.Sys().(syscall.WaitStatus); ok && status.Signaled() {
			return 128 + int(status.Signal())
		}
		return exit.ExitCode()
	}
	return -1
}

// logFile is an output file appended to by this run, remembering where the run began.
type logFile struct {
	file  *os.File
	start int64
}

func openLog(path string) (*logFile, error) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	info, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, err
	}
	return &logFile{file: f, start: info.Size()}, nil
}

func (l *logFile) Close() error { return l.file.Close() }

// tail returns up to TailSize bytes of what this run wrote.
func (l *logFile) tail() string {
	return readTail(l.file.Name(), l.start, TailSize)
}
