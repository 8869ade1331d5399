// Command failures reads `go test` output on standard input and prints what failed, with
// each failed test's last messages (testlimit.WriteFailureSummary). `make test` runs it at
// the end of a failed run, where CI shows the output.
package main

import (
	"fmt"
	"os"

	"github.com/clusterflow/clusterflow/internal/testlimit"
)

func main() {
	if err := testlimit.WriteFailureSummary(os.Stdin, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "failures:", err)
		os.Exit(1)
	}
}
