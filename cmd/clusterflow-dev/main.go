// Command clusterflow-dev is clusterflow with the embedded Temporal server and Web UI
// linked in: what `clusterflow dev` runs. The other commands are here too, but the
// clusterflow binary, without the server, starts them faster.
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
