package spec

import (
	"fmt"
	"strings"
)

// Problem is one thing wrong with a spec, located by its field path, e.g. roles[1].dependsOn.
type Problem struct {
	Path    string `json:"path"`
	Message string `json:"message"`
}

func (p Problem) String() string { return p.Path + ": " + p.Message }

// InvalidError carries every problem found in a spec, so a user fixes them in one go.
type InvalidError struct {
	Origin   string
	Problems []Problem
}

func (e *InvalidError) Error() string {
	lines := make([]string, 0, len(e.Problems)+1)
	what := "spec"
	if e.Origin != "" {
		what = e.Origin
	}
	lines = append(lines, fmt.Sprintf("%s is invalid (%d %s):", what, len(e.Problems), plural(len(e.Problems), "problem")))
	for _, p := range e.Problems {
		lines = append(lines, "  "+p.String())
	}
	return strings.Join(lines, "\n")
}

// problems collects problems in the order they are found.
type problems []Problem

func (ps *problems) add(path, format string, args ...any) {
	*ps = append(*ps, Problem{Path: path, Message: fmt.Sprintf(format, args...)})
}

func plural(n int, word string) string {
	if n == 1 {
		return word
	}
	return word + "s"
}
