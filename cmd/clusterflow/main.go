// Command clusterflow deploys, watches and deletes multi-role clusters as Temporal workflows.
package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/spf13/pflag"

	"github.com/clusterflow/clusterflow/internal/spec"
	"github.com/clusterflow/clusterflow/starter"
)

type command struct {
	name, args, summary string
	run                 func(ctx context.Context, args []string) error
}

var commands = []command{
	{"dev", "[-f SPEC]", "run an embedded Temporal server, its Web UI and a worker; deploy SPEC if given", runDev},
	{"worker", "", "run a worker against an existing Temporal server", runWorker},
	{"agent", "", "run the member agent (workers start it when needed)", runAgent},
	{"setup", "", "register clusterflow's search attributes on an existing Temporal server", runSetup},
	{"deploy", "-f SPEC [--wait]", "deploy a new cluster", runDeploy},
	{"resize", "NAME ROLE=N... [--wait]", "change the member count of roles", runResize},
	{"apply", "-f SPEC [--wait]", "change an existing cluster to match a spec", runApply},
	{"cancel", "NAME [--wait]", "stop the operation in progress", runCancel},
	{"signal", "NAME MEMBER EVENT", "report a member down, up, gone or unhealthy", runSignal},
	{"resume", "NAME", "replace unavailable members despite the meltdown guard; clear flapping", runResume},
	{"reconcile", "NAME", "compare members with the backend now: remove rogues, replace the gone", runReconcile},
	{"status", "NAME [-o json]", "show a cluster's phase, roles and members", runStatus},
	{"list", "[-o json] [--all]", "list clusters", runList},
	{"delete", "NAME [--wait]", "tear a cluster down and remove its members", runDelete},
}

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:])
	stop()
	os.Exit(code)
}

func run(ctx context.Context, args []string) int {
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		usage()
		if len(args) == 0 {
			return exitBadInput
		}
		return exitOK
	}
	for _, c := range commands {
		if c.name == args[0] {
			return exitCode(c.run(ctx, args[1:]))
		}
	}
	fmt.Fprintf(os.Stderr, "clusterflow: unknown command %q\n\n", args[0])
	usage()
	return exitBadInput
}

func usage() {
	fmt.Fprintln(os.Stderr, "Usage: clusterflow COMMAND [flags]\n\nCommands:")
	for _, c := range commands {
		fmt.Fprintf(os.Stderr, "  %-9s %-25s %s\n", c.name, c.args, c.summary)
	}
	fmt.Fprintln(os.Stderr, "\nRun `clusterflow COMMAND -h` for a command's flags.")
}

// Exit statuses: scripts rely on these.
const (
	exitOK       = 0
	exitFailed   = 1
	exitBadInput = 2
)

// failure is an operation that ran and failed (exit 1) after printing its own report.
type failure struct{ message string }

func (f failure) Error() string { return f.message }

// badInput is a request refused before anything started (exit 2).
type badInput struct{ err error }

func (b badInput) Error() string { return b.err.Error() }

func exitCode(err error) int {
	var invalid *spec.InvalidError
	var bad badInput
	var failed failure
	switch {
	case err == nil || errors.Is(err, pflag.ErrHelp):
		return exitOK
	case errors.As(err, &failed):
		if failed.message != "" {
			fmt.Fprintln(os.Stderr, "clusterflow:", failed.message)
		}
		return exitFailed
	case errors.As(err, &invalid), errors.As(err, &bad), starter.IsBadInput(err):
		fmt.Fprintln(os.Stderr, "clusterflow:", err)
		return exitBadInput
	}
	fmt.Fprintln(os.Stderr, "clusterflow:", err)
	return exitFailed
}
