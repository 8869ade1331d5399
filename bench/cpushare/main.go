// Command cpushare runs a command (the suite, say) and tells where the machine's CPU went
// while it ran, by program: each process's own CPU time, read from /proc every interval and
// summed by its name, and the CPU time of the children each program waited for (short
// scripts that start and end between two reads are found there, under their parent). The
// machine's busy time from /proc/stat is the total they share; what the table does not
// cover is processes that ended unwaited between two reads, and the kernel's own work.
// Waited time nests: a shell's children are in its parent's waited time too.
//
// `time make test` sees only the processes make waits for; agents and the scripts they
// run are detached from it by design, so it told half of the suite's CPU.
//
//	go run ./bench/cpushare [-interval 1s] [-top 20] -- make test
package main

import (
	"bufio"
	"cmp"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// clockTicks is the kernel's USER_HZ, the unit of /proc's times: 100 on every Linux this
// runs on.
const clockTicks = 100

func main() {
	interval := flag.Duration("interval", time.Second, "how often /proc is read")
	top := flag.Int("top", 20, "programs listed in each table")
	flag.Parse()
	if flag.NArg() == 0 {
		fmt.Fprintln(os.Stderr, "usage: cpushare [-interval D] [-top N] -- COMMAND [ARGS...]")
		os.Exit(2)
	}
	cmd := exec.Command(flag.Arg(0), flag.Args()[1:]...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	signal.Ignore(syscall.SIGINT) // the command gets it from the terminal, and ends
	s := newSampler()
	s.read()
	start, busyBefore := time.Now(), machineBusy()
	if err := cmd.Start(); err != nil {
		fmt.Fprintln(os.Stderr, "cpushare:", err)
		os.Exit(1)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	tick := time.NewTicker(*interval)
	var err error
	for waiting := true; waiting; {
		select {
		case <-tick.C:
			s.read()
		case err = <-done:
			s.read()
			waiting = false
		}
	}
	s.report(os.Stderr, *top, time.Since(start), machineBusy()-busyBefore)
	var exit *exec.ExitError
	if errors.As(err, &exit) {
		os.Exit(exit.ExitCode())
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "cpushare:", err)
		os.Exit(1)
	}
}

// proc is what one read of a process found: its name, when it started (a PID used again
// is another process), its own CPU ticks and its waited children's.
type proc struct {
	name         string
	started      uint64
	self, waited uint64
}

type sampler struct {
	seen          map[int]proc
	self, waited  map[string]uint64
	first         bool
	processesSeen int
}

func newSampler() *sampler {
	return &sampler{seen: map[int]proc{}, self: map[string]uint64{}, waited: map[string]uint64{}, first: true}
}

// read adds what each process used since the last read; one that started since counts
// whole, but on the first read, which only sets where each one stands.
func (s *sampler) read() {
	now := map[int]proc{}
	paths, _ := filepath.Glob("/proc/[0-9]*/stat")
	for _, path := range paths {
		pid, err := strconv.Atoi(filepath.Base(filepath.Dir(path)))
		if err != nil {
			continue
		}
		p, ok := readStat(path)
		if !ok {
			continue
		}
		now[pid] = p
		if s.first {
			continue
		}
		before, known := s.seen[pid]
		if !known || before.started != p.started {
			before = proc{}
			s.processesSeen++
		}
		s.self[p.name] += p.self - min(before.self, p.self)
		s.waited[p.name] += p.waited - min(before.waited, p.waited)
	}
	s.seen, s.first = now, false
}

// readStat reads /proc/PID/stat: the name is in parentheses and may hold spaces.
func readStat(path string) (proc, bool) {
	data, err := os.ReadFile(path)
	if err != nil {
		return proc{}, false
	}
	open, end := strings.IndexByte(string(data), '('), strings.LastIndexByte(string(data), ')')
	if open < 0 || end < open {
		return proc{}, false
	}
	fields := strings.Fields(string(data[end+1:]))
	// After the name: state (field 3) ... utime 14, stime 15, cutime 16, cstime 17, starttime 22.
	if len(fields) < 20 {
		return proc{}, false
	}
	n := func(field int) uint64 { v, _ := strconv.ParseUint(fields[field-3], 10, 64); return v }
	return proc{name: string(data[open+1 : end]), started: n(22), self: n(14) + n(15), waited: n(16) + n(17)}, true
}

// machineBusy is the CPU seconds every core spent on anything but idling, since boot.
func machineBusy() float64 {
	f, err := os.Open("/proc/stat")
	if err != nil {
		return 0
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Scan()
	fields := strings.Fields(sc.Text()) // cpu user nice system idle iowait irq softirq steal
	var busy uint64
	for i, v := range fields[1:min(len(fields), 9)] {
		if i == 3 || i == 4 { // idle, iowait
			continue
		}
		n, _ := strconv.ParseUint(v, 10, 64)
		busy += n
	}
	return float64(busy) / clockTicks
}

func (s *sampler) report(w *os.File, top int, wall time.Duration, busy float64) {
	var own uint64
	for _, v := range s.self {
		own += v
	}
	fmt.Fprintf(w, "\ncpushare: %s of wall time; the machine was busy %.0f CPU-seconds (%.0f%% of %d cores); %d processes seen, their own time %.0f CPU-seconds\n",
		wall.Round(time.Second), busy, 100*busy/wall.Seconds()/float64(cores()), cores(), s.processesSeen, float64(own)/clockTicks)
	table := func(title string, m map[string]uint64) {
		names := make([]string, 0, len(m))
		for name, v := range m {
			if v > 0 {
				names = append(names, name)
			}
		}
		slices.SortFunc(names, func(a, b string) int { return cmp.Or(cmp.Compare(m[b], m[a]), strings.Compare(a, b)) })
		fmt.Fprintf(w, "\n| %s | CPU-seconds | share of busy |\n|---|---:|---:|\n", title)
		for _, name := range names[:min(top, len(names))] {
			fmt.Fprintf(w, "| %s | %.0f | %.1f%% |\n", name, float64(m[name])/clockTicks, 100*float64(m[name])/clockTicks/busy)
		}
	}
	table("program (own time)", s.self)
	table("program (children it waited for)", s.waited)
}

func cores() int {
	data, err := os.ReadFile("/proc/stat")
	if err != nil {
		return 1
	}
	n := 0
	for _, line := range strings.Split(string(data), "\n") {
		if strings.HasPrefix(line, "cpu") && !strings.HasPrefix(line, "cpu ") {
			n++
		}
	}
	return max(n, 1)
}
