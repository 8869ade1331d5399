// Command clusterflow deploys, watches and deletes multi-role clusters as Temporal workflows.
// It carries every command, `dev` (the embedded Temporal server and Web UI) included;
// cmd/clusterflow-host is the same without `dev`, for the hosts of a fleet.
package main

import (
	"os"

	"github.com/clusterflow/clusterflow/internal/cli"
	"github.com/clusterflow/clusterflow/internal/devserver"
)

func main() {
	os.Exit(cli.Main(&cli.Embedded{
		StartServer: func(o cli.EmbeddedServerOptions) (cli.EmbeddedServer, error) {
			return devserver.Start(devserver.Options{
				DBFile: o.DBFile, Address: o.Address, Namespace: o.Namespace, Logger: o.Logger, SearchAttributes: o.SearchAttributes,
			})
		},
		StartUI: func(address, temporalAddress, namespace, codecEndpoint string) (cli.EmbeddedUI, error) {
			return devserver.StartUI(address, temporalAddress, namespace, codecEndpoint)
		},
	}))
}
