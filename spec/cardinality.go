package spec

import (
	"fmt"
	"strconv"
	"strings"
)

// Cardinality is "N" (exactly N members) or "N+" (at least N).
type Cardinality string

// ParseCardinality checks the text and splits it into its bound and whether it is open.
func ParseCardinality(text string) (min int, orMore bool, err error) {
	digits, orMore := strings.CutSuffix(text, "+")
	n, convErr := strconv.Atoi(digits)
	if convErr != nil || n < 0 || digits == "" || strings.TrimLeft(digits, "0123456789") != "" {
		return 0, false, fmt.Errorf("%q is not a cardinality (want \"N\" or \"N+\", e.g. \"1\" or \"3+\")", text)
	}
	return n, orMore, nil
}

// Allows reports whether a role with this cardinality may have n members, and if not, why.
func (c Cardinality) Allows(n int) error {
	min, orMore, err := ParseCardinality(string(c))
	if err != nil {
		return err
	}
	if (orMore && n < min) || (!orMore && n != min) {
		return fmt.Errorf("cardinality %q does not allow %d members", c, n)
	}
	return nil
}
