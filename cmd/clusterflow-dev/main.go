// Command clusterflow-dev is clusterflow with the embedded Temporal server and Web UI
// linked in: what `clusterflow dev` runs. The other commands are here too, but the
// clusterflow binary, without the server, starts them faster.
package main

import (
	"os"

	"github.com/clusterflow/clusterflow/internal/cli"
	"github.com/clusterflow/clusterflow/internal/devserver"
	"github.com/clusterflow/clusterflow/internal/localca"
)

func main() {
	os.Exit(cli.Main(&cli.Embedded{
		StartServer: func(o cli.EmbeddedServerOptions) (cli.EmbeddedServer, error) {
			return devserver.Start(devserver.Options{
				DBFile: o.DBFile, Address: o.Address, Namespace: o.Namespace, Logger: o.Logger, SearchAttributes: o.SearchAttributes,
				TLS: &devserver.TLS{CertFile: o.TLS.ServerCert, KeyFile: o.TLS.ServerKey, ClientCAFile: o.TLS.CA, ServerName: localca.ServerName},
			})
		},
		StartUI: func(o cli.EmbeddedUIOptions) (cli.EmbeddedUI, error) {
			return devserver.StartUI(devserver.UIOptions{
				Address: o.Address, TemporalAddress: o.TemporalAddress, Namespace: o.Namespace, CodecEndpoint: o.CodecEndpoint,
				TLS:     &devserver.ClientTLS{CAFile: o.TLS.CA, CertFile: o.TLS.ClientCert, KeyFile: o.TLS.ClientKey, ServerName: localca.ServerName},
				Session: &o.Session, Logger: o.Logger,
			})
		},
	}))
}
