package render

import (
	"fmt"
	"io"
	"text/tabwriter"
	"time"

	"github.com/clusterflow/clusterflow/starter"
)

// List prints clusters as a table.
func List(w io.Writer, clusters []starter.ClusterSummary, now time.Time) {
	if len(clusters) == 0 {
		fmt.Fprintln(w, "No clusters.")
		return
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "NAME\tPHASE\tSTARTED")
	for _, c := range clusters {
		fmt.Fprintf(tw, "%s\t%s\t%s\n", c.Name, c.Phase, Ago(c.StartedAt, now))
	}
	tw.Flush()
}
