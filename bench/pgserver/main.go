// Command pgserver runs the production path for the benchmarks: Temporal's own server on a
// private PostgreSQL, configured as docker-compose.yml configures it (the same code as the
// e2e tests, internal/testenv). It prints the server's address and process ID, a client's
// environment as "Env: NAME=VALUE" lines (the compose file's hosts' client certificate),
// then "Ready.", and runs until it gets SIGINT or SIGTERM; everything it started goes with
// it.
//
//	go run ./bench/pgserver -dir DIR
package main

import (
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/clusterflow/clusterflow/internal/testenv"
)

func main() {
	dir := flag.String("dir", "", "folder for the database, the server's logs and the built programs' output")
	flag.Parse()
	if *dir == "" {
		fmt.Fprintln(os.Stderr, "pgserver: -dir is required")
		os.Exit(2)
	}
	if err := run(*dir); err != nil {
		fmt.Fprintln(os.Stderr, "pgserver:", err)
		os.Exit(1)
	}
}

func run(dir string) error {
	defer testenv.RemoveBuilds()
	server, err := testenv.NewProductionServer(dir)
	if err != nil {
		return err
	}
	defer server.Stop()
	proc, err := server.Start("temporal-server")
	if err != nil {
		return err
	}
	defer proc.Stop()
	fmt.Println("Address:", server.Address)
	fmt.Println("Server PID:", proc.Pid())
	for _, kv := range server.ClientEnv {
		fmt.Println("Env:", kv)
	}
	fmt.Println("Ready.")
	stop := make(chan os.Signal, 1)
	signal.Notify(stop, syscall.SIGINT, syscall.SIGTERM)
	<-stop
	return nil
}
