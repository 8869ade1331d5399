package render

import (
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/clusterflow/clusterflow/workflows"
)

// Progress shows a cluster's progress while someone waits: redrawn in place on a terminal,
// and as plain lines (only what changed) otherwise.
type Progress struct {
	w        io.Writer
	terminal bool
	drawn    int               // lines drawn last time, on a terminal
	last     map[string]string // last line printed per key, otherwise
}

// NewProgress writes to w, redrawing in place when w is a terminal.
func NewProgress(w io.Writer) *Progress {
	return &Progress{w: w, terminal: isTerminal(w), last: map[string]string{}}
}

// Update shows the new status.
func (p *Progress) Update(s workflows.ClusterStatus) {
	lines := progressLines(s)
	if p.terminal {
		if p.drawn > 0 {
			fmt.Fprintf(p.w, "\x1b[%dA", p.drawn)
		}
		for _, line := range lines {
			fmt.Fprintf(p.w, "\x1b[2K%s\n", line.text)
		}
		p.drawn = len(lines)
		return
	}
	// Roles first, so a line saying the cluster is ready comes after the last role's news.
	for _, line := range append(lines[1:], lines[0]) {
		if p.last[line.key] != line.text {
			p.last[line.key] = line.text
			fmt.Fprintln(p.w, strings.TrimSpace(line.text))
		}
	}
}

type progressLine struct{ key, text string }

func progressLines(s workflows.ClusterStatus) []progressLine {
	head := fmt.Sprintf("%s: %s", s.Name, s.Phase)
	if s.Message != "" {
		head += " (" + s.Message + ")"
	}
	lines := []progressLine{{"", head}}
	width := 0
	for _, r := range s.Roles {
		width = max(width, len(r.Name))
	}
	for _, r := range s.Roles {
		text := fmt.Sprintf("  %-*s  level %d  %d/%d ready  (%s)", width, r.Name, r.Level, r.Ready, r.Desired, RoleCounts(r))
		lines = append(lines, progressLine{r.Name, text})
	}
	return lines
}

func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	info, err := f.Stat()
	return err == nil && info.Mode()&os.ModeCharDevice != 0 && os.Getenv("TERM") != "dumb"
}
