package runner

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// Spec is a script to start.
type Spec struct {
	Path string
	Args []string
	Dir  string
	Env  []string
	// Sandbox is the folder the files below are named in, and reached only through (see
	// rooted).
	Sandbox string
	// StdoutFile and StderrFile receive the output; they are appended to, and the tails
	// cover only this run.
	StdoutFile, StderrFile string
	// ExitFile receives the script's exit status once it ends, written by a small shell
	// wrapper, so the status survives the death of whoever started the script.
	ExitFile string
	// User, when set, is who the script runs as (the caller must be root): its output
	// files and the exit file's folder are made theirs, and it keeps no supplementary group.
	User *User
	// Cgroup, when set, is the cgroup (v2) folder the script and all it starts run in (see
	// MemberCgroup); it is made if need be.
	Cgroup string
	// Limits, where set, bound the script and all it starts (see Limits).
	Limits Limits
	// Resources, where set, bound the member's cgroup as a whole (needs Cgroup).
	Resources Resources
}

// Limits are resource limits of a script and everything it starts: each zero one is not
// set (the starter's own holds).
type Limits struct {
	// Processes is RLIMIT_NPROC, which counts every process and thread of the script's
	// real user: with a user per cluster, the cluster's on the host.
	Processes int `json:"processes,omitempty"`
	// OpenFiles is RLIMIT_NOFILE, of each process.
	OpenFiles int `json:"openFiles,omitempty"`
	// Output is how many bytes of each of its output files are kept (MaxLogBytes when 0).
	Output int64 `json:"output,omitempty"`
}

// limitedWrapper is wrapper setting the limits first, as hard and soft limits alike, with
// the shell's own ulimit (no process more per run): -u in bash and busybox, -p in dash. A
// limit it cannot set fails the run, with status 126, before the script starts.
const limitedWrapper = `x=$1 p=$2 n=$3; shift 3; ` + gate + `{ { ulimit -u "$p" || ulimit -p "$p"; } && ulimit -n "$n"; } 2>/dev/null || { echo "clusterflow: could not set the script's limits (processes $p, open files $n)" >&2; echo 126 >"$x"; exit 126; }; trap : TERM INT HUP; "$@"; echo $? >"$x"`

// wrapperArgs are the wrapper's arguments before the script's: the exit file's name, and
// the limits. A limit above the starter's own hard limit is lowered to it, since raising
// one takes a privilege (CAP_SYS_RESOURCE) the agent is not given; one not set is the
// starter's own.
func (l Limits) wrapperArgs(exitFile string) []string {
	if l.Processes <= 0 && l.OpenFiles <= 0 {
		return []string{"-c", wrapper, "clusterflow-run", exitFile}
	}
	values := make([]string, 2)
	for i, r := range []struct {
		resource int
		want     int
	}{{unix.RLIMIT_NPROC, l.Processes}, {unix.RLIMIT_NOFILE, l.OpenFiles}} {
		var own unix.Rlimit
		if err := unix.Getrlimit(r.resource, &own); err != nil {
			own.Max = unix.RLIM_INFINITY
		}
		limit := own.Max
		if r.want > 0 && uint64(r.want) < limit {
			limit = uint64(r.want)
		}
		values[i] = strconv.FormatUint(limit, 10)
		if limit == unix.RLIM_INFINITY {
			values[i] = "unlimited"
		}
	}
	return []string{"-c", limitedWrapper, "clusterflow-run", exitFile, values[0], values[1]}
}

// maxOutput is how many bytes of an output file are kept.
func (l Limits) maxOutput() int64 {
	if l.Output > 0 {
		return l.Output
	}
	return MaxLogBytes
}

// User is a numeric user and group a script runs as.
type User struct {
	UID uint32 `json:"uid"`
	GID uint32 `json:"gid"`
}

// Handle finds a started script again, from any process. It is plain data, so it can be
// kept on disk.
type Handle struct {
	// PID is the wrapper's, which leads the script's session and process group.
	PID int `json:"pid"`
	// StartTicks is the wrapper's start time in /proc, to tell a reused PID apart.
	StartTicks uint64 `json:"startTicks"`
	// BootID is the machine's boot the run began in: after a reboot its PID may be anyone's,
	// so a handle of an earlier boot is never running and never signalled.
	BootID string `json:"bootID,omitempty"`
	// Sandbox and the file names are the Spec's; a handle recorded before sandboxes were
	// named has none, and absolute file names.
	Sandbox    string `json:"sandbox,omitempty"`
	StdoutFile string `json:"stdoutFile"`
	StderrFile string `json:"stderrFile"`
	StdoutFrom int64  `json:"stdoutFrom"`
	StderrFrom int64  `json:"stderrFrom"`
	ExitFile   string `json:"exitFile"`
	// MaxOutput is how many bytes of each output file are kept (MaxLogBytes when 0).
	MaxOutput int64 `json:"maxOutput,omitempty"`
}

// KeptOutput is how many bytes of each of the run's output files are kept: past it, the
// file is rotated (RotateLog).
func (h Handle) KeptOutput() int64 { return Limits{Output: h.MaxOutput}.maxOutput() }

// wrapper runs the script and writes its exit status. It survives SIGTERM (the trap only
// defers it until the script ends) so a stopped script still gets its status written;
// the trap is reset for the script itself. The status is one short write, ending in a
// newline, which ExitCode waits for: no rename, so no third process per run (a wide
// role's launches are mostly process starts).
const wrapper = `x=$1; shift; ` + gate + `trap : TERM INT HUP; "$@"; echo $? >"$x"`

// gate holds the wrapper before anything else until its starter says go, on the pipe at
// fd 3 (see Held): a starter that dies first closes the pipe, and the wrapper exits
// without running the script and without an exit status. So a script never runs unless
// its starter lived to record it (the agent's run record), and a starter that finds no
// record of a run knows that it never ran.
const gate = `read -r go <&3 && [ "$go" = go ] || exit 125; exec 3<&-; `

// Spawn starts the script in its own session, detached from the caller: killing the caller
// leaves the script running. The caller's own child is reaped in the background, and the
// returned channel is closed when the wrapper exits, so the caller need not poll.
func Spawn(s Spec) (Handle, <-chan struct{}, error) {
	held, err := SpawnHeld(s)
	if err != nil {
		return Handle{}, nil, err
	}
	if err := held.Release(); err != nil {
		held.Handle.Stop(0)
		return Handle{}, nil, err
	}
	return held.Handle, held.Exited, nil
}

// Held is a script started and held at its wrapper's gate: it runs once Release is called,
// and never if the starter dies (or calls Abandon) first.
type Held struct {
	Handle Handle
	// Exited is closed when the wrapper exits.
	Exited <-chan struct{}
	gate   *os.File
}

// Release lets the script run. An error means it will not: its wrapper is gone.
func (h *Held) Release() error {
	_, err := h.gate.Write([]byte("go\n"))
	if cerr := h.gate.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("release the script: %w", err)
	}
	return nil
}

// Abandon ends the wrapper without running the script.
func (h *Held) Abandon() { _ = h.gate.Close() }

// SpawnHeld starts the script as Spawn does, but holds it before it runs, so that the caller
// can record the run (its Handle) first: see gate.
func SpawnHeld(s Spec) (*Held, error) {
	h, exited, gate, err := startHeld(s)
	if err != nil {
		return nil, err
	}
	return &Held{Handle: h, Exited: exited, gate: gate}, nil
}

func startHeld(s Spec) (Handle, <-chan struct{}, *os.File, error) {
	if s.Sandbox == "" {
		return Handle{}, nil, nil, fmt.Errorf("a script needs a sandbox")
	}
	h := Handle{Sandbox: s.Sandbox, StdoutFile: s.StdoutFile, StderrFile: s.StderrFile, ExitFile: s.ExitFile, MaxOutput: s.Limits.Output}
	root, exitFile, err := rooted(s.Sandbox, s.ExitFile)
	if err != nil {
		return h, nil, nil, err
	}
	defer root.Close()
	_ = root.Remove(exitFile)
	// The wrapper writes the exit status there, maybe before Spawn returns.
	if err := root.MkdirAll(filepath.Dir(exitFile), 0o755); err != nil {
		return h, nil, nil, err
	}
	if err := s.User.Own(root, filepath.Dir(exitFile)); err != nil {
		return h, nil, nil, err
	}
	var files [2]*os.File
	for i, name := range []string{s.StdoutFile, s.StderrFile} {
		f, from, err := openLog(s.Sandbox, name, s.Limits.maxOutput())
		if err != nil {
			return h, nil, nil, err
		}
		defer f.Close()
		if err := s.User.OwnFile(f); err != nil {
			return h, nil, nil, err
		}
		files[i] = f
		if i == 0 {
			h.StdoutFrom = from
		} else {
			h.StderrFrom = from
		}
	}

	args := append(append(s.Limits.wrapperArgs(absolute(s.Sandbox, s.ExitFile)), s.Path), s.Args...)
	cmd := exec.Command("/bin/sh", args...)
	cmd.Dir, cmd.Env = s.Dir, s.Env
	cmd.Stdout, cmd.Stderr = files[0], files[1]
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if s.User != nil {
		cmd.SysProcAttr.Credential = &syscall.Credential{Uid: s.User.UID, Gid: s.User.GID, Groups: []uint32{}}
	}
	var v1 []string
	if s.Cgroup != "" {
		fd, err := openCgroup(s.Cgroup)
		if err != nil {
			return h, nil, nil, err
		}
		defer syscall.Close(fd)
		cmd.SysProcAttr.UseCgroupFD, cmd.SysProcAttr.CgroupFD = true, fd
		if v1, err = bound(s.Cgroup, s.Resources); err != nil {
			return h, nil, nil, err
		}
	} else if need := s.Resources.Controllers(); len(need) > 0 {
		return h, nil, nil, fmt.Errorf("this host cannot bound %s: it makes no cgroups", strings.Join(need, ", "))
	}
	// The gate's pipe: the wrapper reads fd 3; the write end, close-on-exec, is the
	// starter's alone, so that its death (or that of no other child) closes it.
	gateRead, gate, err := os.Pipe()
	if err != nil {
		return h, nil, nil, err
	}
	defer gateRead.Close()
	cmd.ExtraFiles = []*os.File{gateRead}
	if err := cmd.Start(); err != nil {
		gate.Close()
		return h, nil, nil, fmt.Errorf("start %s: %w", s.Path, err)
	}
	exited := make(chan struct{})
	watchExit(cmd, exited)
	h.PID = cmd.Process.Pid
	h.StartTicks, _ = startTicks(h.PID)
	h.BootID = bootID()
	// Held at its gate, the wrapper has run nothing of the script yet.
	if err := joinV1(h.PID, v1); err != nil {
		gate.Close()
		_ = syscall.Kill(-h.PID, syscall.SIGKILL)
		return h, nil, nil, err
	}
	return h, exited, gate, nil
}

// Own gives name, within root, to the user, when there is one: what the script must write
// is theirs, and nothing in its sandbox is left to the agent's user.
func (u *User) Own(root *os.Root, name string) error {
	if u == nil {
		return nil
	}
	return root.Lchown(name, int(u.UID), int(u.GID))
}

// OwnFile gives an open file to the user, when there is one.
func (u *User) OwnFile(f *os.File) error {
	if u == nil {
		return nil
	}
	return f.Chown(int(u.UID), int(u.GID))
}

// bootID is the kernel's ID of this boot of the machine, read once.
var bootID = sync.OnceValue(func() string {
	id, err := os.ReadFile("/proc/sys/kernel/random/boot_id")
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(id))
})

// ofAnotherBoot says the run began before the machine last booted.
func (h Handle) ofAnotherBoot() bool { return h.BootID != "" && h.BootID != bootID() }

// ExitCode returns the exit status the wrapper wrote, if the script has ended.
func (h Handle) ExitCode() (int, bool) {
	f, err := openIn(h.Sandbox, h.ExitFile)
	if err != nil {
		return 0, false
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, 64))
	if err != nil {
		return 0, false
	}
	// Without its newline the status is still being written (or never was: the wrapper died
	// between opening the file and writing it).
	text, complete := strings.CutSuffix(string(data), "\n")
	if !complete {
		return 0, false
	}
	code, err := strconv.Atoi(strings.TrimSpace(text))
	return code, err == nil
}

// Running reports whether anything of the script's process group still runs.
func (h Handle) Running() bool {
	if h.ofAnotherBoot() {
		return false
	}
	fields, ok := statFields(h.PID)
	if ok && len(fields) >= 20 && (h.StartTicks == 0 || fields[19] == strconv.FormatUint(h.StartTicks, 10)) && fields[0] != "Z" {
		return true // the wrapper lives as long as the script: the cheap, common answer
	}
	if ticks, ok := startTicks(h.PID); ok && h.StartTicks != 0 && ticks != h.StartTicks {
		return false // the PID now belongs to someone else, so the group is long gone
	}
	return groupAlive(h.PID) // the wrapper is gone; something it started may linger
}

// Stop sends SIGTERM to the whole group, gives it the grace period to exit, then sends
// SIGKILL to whatever is left and waits briefly for it to go.
func (h Handle) Stop(grace time.Duration) {
	if h.PID < 2 || !h.Running() {
		// kill(-1) would signal every process the agent may, kill(0) its own group; a
		// run of an earlier boot is not running, whoever has its PID now.
		return
	}
	_ = syscall.Kill(-h.PID, syscall.SIGTERM)
	waitGroupGone(h.PID, grace)
	if groupAlive(h.PID) {
		_ = syscall.Kill(-h.PID, syscall.SIGKILL)
		waitGroupGone(h.PID, 2*time.Second)
	}
}

// Tails returns up to TailSize bytes of what this run wrote to each stream.
func (h Handle) Tails() (stdout, stderr string) {
	return readTail(h.Sandbox, h.StdoutFile, h.StdoutFrom, TailSize), readTail(h.Sandbox, h.StderrFile, h.StderrFrom, TailSize)
}

// LastLine returns the last non-empty line this run wrote to whichever stream was written
// most recently.
func (h Handle) LastLine() string {
	path, from := h.StdoutFile, h.StdoutFrom
	if modTime(h.Sandbox, h.StderrFile, h.StderrFrom) > modTime(h.Sandbox, h.StdoutFile, h.StdoutFrom) {
		path, from = h.StderrFile, h.StderrFrom
	}
	text := strings.TrimRight(readTail(h.Sandbox, path, from, 1024), "\n")
	if i := strings.LastIndexByte(text, '\n'); i >= 0 {
		text = text[i+1:]
	}
	return strings.TrimSpace(text)
}

func modTime(sandbox, name string, from int64) int64 {
	f, err := openIn(sandbox, name)
	if err != nil {
		return 0
	}
	defer f.Close()
	info, err := f.Stat()
	if err != nil || info.Size() == from {
		return 0
	}
	return info.ModTime().UnixNano()
}

// openLog opens a script's output file for it to append to. Anything but a plain file
// there (a link, a hard link or a FIFO the script planted, say: see OpenScriptFile) is
// replaced by one, made afresh, so that nothing but the file itself is ever given to the
// script's user.
func openLog(sandbox, name string, limit int64) (*os.File, int64, error) {
	if _, err := RotateLog(sandbox, name, limit); err != nil {
		return nil, 0, err
	}
	root, name, err := rooted(sandbox, name)
	if err != nil {
		return nil, 0, err
	}
	defer root.Close()
	if err := root.MkdirAll(filepath.Dir(name), 0o755); err != nil {
		return nil, 0, err
	}
	if info, err := root.Lstat(name); err == nil && !info.Mode().IsRegular() {
		if err := root.Remove(name); err != nil {
			return nil, 0, err
		}
	}
	f, err := OpenScriptFile(root, name, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		// A FIFO with no reader refuses a non-blocking writer (ENXIO); a hard link or
		// anything else is refused by OpenScriptFile. Neither is what it names: replace
		// it, and take only a file made now (O_EXCL), whoever races to put another there.
		if err := root.Remove(name); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return nil, 0, err
		}
		if f, err = OpenScriptFile(root, name, os.O_CREATE|os.O_EXCL|os.O_WRONLY|os.O_APPEND, 0o644); err != nil {
			return nil, 0, err
		}
	}
	info, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, 0, err
	}
	return f, info.Size(), nil
}

// startTicks reads a process's start time (field 22 of /proc/PID/stat).
func startTicks(pid int) (uint64, bool) {
	fields, ok := statFields(pid)
	if !ok || len(fields) < 20 {
		return 0, false
	}
	ticks, err := strconv.ParseUint(fields[19], 10, 64)
	return ticks, err == nil
}
