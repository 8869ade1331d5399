package spec

import (
	"fmt"
	"strings"

	"github.com/clusterflow/clusterflow/internal/apperr"
)

// Problem is one thing wrong with a spec, located by its field path, e.g. roles[1].dependsOn.
type Problem = apperr.Problem

// invalid is the error for a spec with problems: every one of them, so a user fixes them in
// one go.
func invalid(origin string, ps []Problem) error {
	lines := make([]string, 0, len(ps)+1)
	what := "spec"
	if origin != "" {
		what = origin
	}
	lines = append(lines, fmt.Sprintf("%s is invalid (%d %s):", what, len(ps), plural(len(ps), "problem")))
	for _, p := range ps {
		lines = append(lines, "  "+p.String())
	}
	return &apperr.Error{Code: apperr.Invalid, Message: strings.Join(lines, "\n"), Problems: ps}
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
