// Command clusterflow-host is clusterflow without `dev`: the worker, the agent and the client
// commands, without the embedded Temporal server and Web UI, for the hosts of a fleet.
package main

import (
	"os"

	"github.com/clusterflow/clusterflow/internal/cli"
)

func main() { os.Exit(cli.Main(nil)) }
