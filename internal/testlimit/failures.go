package testlimit

import (
	"bufio"
	"fmt"
	"io"
	"regexp"
	"strings"
)

var (
	// A test's result line, indented for a subtest; Guard's abort prints one too.
	resultLine = regexp.MustCompile(`^\s*--- (FAIL|PASS|SKIP): (\S+)`)
	// A line the test logged (t.Log, t.Error, t.Fatal): "    file_test.go:42: text". The
	// further lines of a message logged on many lines are indented past it, and not kept.
	messageLine = regexp.MustCompile(`^ +[\w.-]+\.go:\d+: `)
	// A package's own verdict, or the end of a test binary's output.
	packageLine = regexp.MustCompile(`^(FAIL|ok|PASS)(\s|$)`)
)

// How many of a failed test's last messages the summary keeps, and how much of each.
const (
	messagesKept  = 6
	messageLength = 400
)

// WriteFailureSummary reads `go test` output (not -json) and writes every failed test with
// its last logged messages, where the reason for a failure is: a short list to print at the
// very end of a long run, since CI shows only the end of the output, and the suite's own
// logs (a failed test's stack logs, the shared worker's) push the failures out of it. It
// writes nothing when no test failed, and says so when a package failed without one (a
// build error, a panic).
func WriteFailureSummary(r io.Reader, w io.Writer) error {
	type failure struct {
		header   string
		messages []string
	}
	var failures []*failure
	// A test's messages are indented one step (4 spaces) past its result line, and come
	// after its subtests' results: each result line's failure (nil for a pass) by its
	// indentation.
	byIndent := map[int]*failure{}
	var packages []string
	panicked := ""
	lines := bufio.NewReader(r)
	for {
		line, err := lines.ReadString('\n')
		line = strings.TrimRight(line, "\r\n")
		indent := len(line) - len(strings.TrimLeft(line, " "))
		switch m := resultLine.FindStringSubmatch(line); {
		case m != nil:
			var f *failure
			if m[1] == "FAIL" {
				f = &failure{header: strings.TrimSpace(line)}
				failures = append(failures, f)
			}
			for i := range byIndent {
				if i >= indent {
					delete(byIndent, i)
				}
			}
			byIndent[indent] = f
		case packageLine.MatchString(line):
			clear(byIndent)
			if strings.HasPrefix(line, "FAIL\t") {
				packages = append(packages, line)
			}
		case messageLine.MatchString(line):
			if f := byIndent[indent-4]; f != nil {
				f.messages = append(f.messages, shorten(strings.TrimSpace(line), messageLength))
				if len(f.messages) > messagesKept {
					f.messages = f.messages[1:]
				}
			}
		case strings.HasPrefix(line, "panic: ") && panicked == "":
			panicked = shorten(line, messageLength)
		}
		if err == io.EOF {
			break
		}
		if err != nil {
			return err
		}
	}
	if len(failures) == 0 && len(packages) == 0 && panicked == "" {
		return nil
	}
	fmt.Fprintf(w, "\n=== What failed (the last %d messages each failed test logged; the whole output is above)\n", messagesKept)
	for _, f := range failures {
		fmt.Fprintln(w, f.header)
		for _, m := range f.messages {
			fmt.Fprintln(w, "    "+m)
		}
	}
	if len(failures) == 0 {
		fmt.Fprintln(w, "no test failed by itself: a package failed to build, vet or run")
	}
	if panicked != "" {
		fmt.Fprintln(w, panicked)
	}
	for _, p := range packages {
		fmt.Fprintln(w, p)
	}
	return nil
}

func shorten(s string, n int) string {
	if r := []rune(s); len(r) > n {
		return string(r[:n]) + " …"
	}
	return s
}
