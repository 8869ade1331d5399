package cli

import (
	"context"
	"os"
	"time"

	"github.com/clusterflow/clusterflow/internal/render"
	"github.com/clusterflow/clusterflow/starter"
)

func runList(ctx context.Context, args []string) error {
	fs := newFlagSet("list", "[-o json] [--all]")
	var conn connection
	conn.register(fs, "warn")
	out := outputFlag(fs)
	all := fs.Bool("all", false, "include deleted clusters")
	if err := fs.Parse(args); err != nil {
		return flagError(err)
	}
	st, _, closeClient, err := conn.starter(ctx)
	if err != nil {
		return err
	}
	defer closeClient()
	clusters, err := st.List(ctx, *all)
	if err != nil {
		return err
	}
	if *out == "json" {
		if clusters == nil {
			clusters = []starter.ClusterSummary{}
		}
		return printJSON(clusters)
	}
	render.List(os.Stdout, clusters, time.Now())
	return nil
}
