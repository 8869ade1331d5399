// Package cli is clusterflow's command line: every command, for the two binaries that
// carry it. cmd/clusterflow adds `dev`, which embeds the Temporal server and Web UI;
// cmd/clusterflow-host leaves them out, so that what runs on every host of a fleet (the
// worker, the agent and the client commands) stays small.
package cli

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/spf13/pflag"

	"github.com/clusterflow/clusterflow/internal/apperr"
	"github.com/clusterflow/clusterflow/internal/profiling"
)

type command struct {
	name, args, summary string
	run                 func(ctx context.Context, args []string) error
}

var commands = []command{
	{"dev", "[-f SPEC]", "run an embedded Temporal server, its Web UI and a worker; deploy SPEC if given", nil},
	{"worker", "", "run a worker against an existing Temporal server", runWorker},
	{"agent", "", "run the member agent (workers start it when needed)", runAgent},
	{"container-exec", "--engine H --container C -- SCRIPT...", "run a startscript in a member's container (the agent does, on a docker host)", runContainerExec},
	{"setup", "", "register clusterflow's search attributes on an existing Temporal server", runSetup},
	{"certs", "--ca-dir DIR --server DIR=OWNER --client DIR=OWNER...", "make or keep the certificates of a stack whose Temporal server demands client certificates", runCerts},
	{"deploy", "-f SPEC [--wait] [--sign-key F]", "deploy a new cluster", runDeploy},
	{"resize", "NAME ROLE=N... [--remove MEMBER,...] [--wait] [--sign-key F]", "change the member count of roles, or take named members away", runResize},
	{"apply", "-f SPEC [--wait] [--sign-key F]", "change an existing cluster to match a spec", runApply},
	{"set", "NAME ROLE env NAME=VALUE|NAME-... [--dry-run] [--wait] [--sign-key F]", "change one role's env in the running spec, and roll it out as apply does", runSet},
	{"cancel", "NAME [--wait]", "stop the operation in progress", runCancel},
	{"retry", "NAME [MEMBER...] [--wait]", "run again the failed configure of members in config_error (default: all of them)", runRetry},
	{"rollout", "status|pause|resume|undo NAME [--wait] [--to-revision N]", "follow, pause, resume or undo the rollout of a new revision", runRollout},
	{"restart", "NAME [--role R] [--members A,B] [--wait]", "restart members one batch at a time, by their role's update policy and health gate", runRestart},
	{"run", "NAME ACTION [--role R] [--members A,B] [--param k=v]... [--parallel N] [--wait]", "run a role's named action on members and show each one's result", runAction},
	{"revisions", "NAME [-o json]", "list a cluster's revisions: when, by whom, what changed", runRevisions},
	{"signal", "NAME MEMBER EVENT", "report a member down, up, gone or unhealthy (as an update, checked and answered)", runSignal},
	{"resume", "NAME", "replace unavailable members despite the meltdown guard; clear flapping", runResume},
	{"reconcile", "NAME", "compare members with the backend now: remove rogues, replace the gone", runReconcile},
	{"status", "NAME [-o json]", "show a cluster's phase, roles and members", runStatus},
	{"list", "[-o json] [--all]", "list clusters", runList},
	{"delete", "NAME [--wait]", "tear a cluster down and remove its members", runDelete},
	{"logs", "NAME MEMBER [--event E] [-f]", "show a member's script output, from whichever host holds it", runLogs},
	{"hosts", "[-o json]", "list the hosts that hold members", runHosts},
	{"gateway", "--tokens-file F | token NAME", "serve the HTTP health gateway (Alertmanager, webhooks); make a token", runGateway},
	{"codec-server", "--codec-key-file F [--allowed-origins URL]", "serve the payload codec for the Web UI and `temporal --codec-endpoint`", runCodecServer},
	{"codec-key", "new ID", "print a new codec key line for a --codec-key-file", runCodecKey},
	{"keys", "new NAME [--out FILE]", "make a key to sign specs with (--sign-key), and print its line for hosts' --trusted-keys", runKeys},
	{"maintenance", "on --reason TEXT | off | status", "hold every cluster for a move or an upgrade: changes refused, operations stopped", runMaintenance},
	{"export", "--all | NAME... [-o FILE] | --retire NAME...", "write clusters to a file, to import on another server; retire them here after", runExport},
	{"import", "-f FILE [--dry-run]", "adopt exported clusters on this server, running no script (in maintenance)", runImport},
	{"simulate", "--hosts N [--prefix P] [--host-timeout D]", "run N light hosts in this process, sharing one agent, to try the registry at thousands of hosts", runSimulate},
	{"host", "cordon|uncordon|drain|forget NAME [--wait]", "keep new members off a host or allow them again, move its members elsewhere, or remove a lost or empty host", runHost},
	{"version", "[-o json]", "print this binary's release and the commit it was built from", runVersion},
}

// Main runs the command line and returns the exit status. embedded serves `dev`; a binary
// without it (nil) says which binary has it.
func Main(embedded *Embedded) int {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	return run(ctx, os.Args[1:], embedded)
}

func run(ctx context.Context, args []string, embedded *Embedded) int {
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		usage()
		if len(args) == 0 {
			return apperr.ExitBadInput
		}
		return apperr.ExitOK
	}
	if err := profiling.Start(args[0]); err != nil {
		fmt.Fprintln(os.Stderr, "clusterflow:", err)
	}
	if args[0] == "dev" {
		return exitCode(runDev(ctx, args[1:], embedded))
	}
	for _, c := range commands {
		if c.name == args[0] {
			return exitCode(c.run(ctx, args[1:]))
		}
	}
	fmt.Fprintf(os.Stderr, "clusterflow: unknown command %q\n\n", args[0])
	usage()
	return apperr.ExitBadInput
}

func usage() {
	fmt.Fprintln(os.Stderr, "Usage: clusterflow COMMAND [flags]\n\nCommands:")
	for _, c := range commands {
		fmt.Fprintf(os.Stderr, "  %-9s %-25s %s\n", c.name, c.args, c.summary)
	}
	fmt.Fprintln(os.Stderr, "\nRun `clusterflow COMMAND -h` for a command's flags.")
}

// exitCode prints err and turns it into the exit status (apperr.ExitCode); help is no error.
func exitCode(err error) int {
	if err == nil || errors.Is(err, pflag.ErrHelp) {
		return apperr.ExitOK
	}
	fmt.Fprintln(os.Stderr, "clusterflow:", err)
	return apperr.ExitCode(err)
}
