package cli

import (
	"context"
	"fmt"

	"github.com/clusterflow/clusterflow/internal/apperr"
	"github.com/clusterflow/clusterflow/internal/version"
)

// runVersion prints this binary's release and commit; `hosts` shows each host's worker's.
func runVersion(_ context.Context, args []string) error {
	fs := newFlagSet("version", "[-o json]")
	out := outputFlag(fs)
	if err := fs.Parse(args); err != nil {
		return flagError(err)
	}
	if fs.NArg() > 0 {
		return apperr.Errorf(apperr.Invalid, "version takes no arguments")
	}
	v := version.Get()
	if *out == "json" {
		return printJSON(v)
	}
	fmt.Printf("clusterflow %s, %s\n", v, v.Go)
	return nil
}
