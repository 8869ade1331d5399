// Command go-client drives clusterflow through its client library alone, as a program in
// another module would: it deploys a small cluster from a spec built in code, resizes it,
// watches it settle each time, and deletes it.
//
//	clusterflow dev &                 # a server and a worker on 127.0.0.1:7233
//	go run . --address 127.0.0.1:7233 --name example
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"time"

	"github.com/clusterflow/clusterflow/spec"
	"github.com/clusterflow/clusterflow/starter"
	"github.com/clusterflow/clusterflow/workflows"
)

// script is the members' startscript: it says which event it runs, for whom.
const script = `#!/bin/sh
echo "$CLUSTERFLOW_EVENT on $CLUSTERFLOW_MEMBER ($*)"
`

func main() {
	address := flag.String("address", "127.0.0.1:7233", "the Temporal server clusterflow's worker serves")
	namespace := flag.String("namespace", "default", "the Temporal namespace")
	name := flag.String("name", "example", "the cluster's name")
	workers := flag.Int("workers", 3, "the worker role's members after the resize")
	timeout := flag.Duration("timeout", 3*time.Minute, "how long each step may take")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if err := run(ctx, *address, *namespace, *name, *workers, *timeout); err != nil {
		fmt.Fprintln(os.Stderr, "go-client:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, address, namespace, name string, workers int, timeout time.Duration) error {
	options, _, err := starter.ClientOptions(starter.ConnectOptions{Address: address, Namespace: namespace})
	if err != nil {
		return err
	}
	c, err := starter.Dial(ctx, options)
	if err != nil {
		return err
	}
	defer c.Close()
	st := starter.New(c, "")

	cluster, err := spec.Parse([]byte(clusterYAML(name)), "go-client", func(string) ([]byte, error) { return []byte(script), nil })
	if err != nil {
		return err
	}
	err = st.Deploy(ctx, cluster, starter.DeployOptions{})
	if starter.ErrorCodeOf(err) == starter.ErrConflict {
		return fmt.Errorf("cluster %s exists already; delete it first: %w", name, err)
	} else if err != nil {
		return err
	}
	if err := settle(ctx, st, name, 1, timeout); err != nil {
		return err
	}

	change, err := st.Resize(ctx, name, []workflows.RoleCount{{Role: "worker", Members: workers}})
	if err != nil {
		return err
	}
	fmt.Printf("resize: %s (generation %d)\n", change.Summary, change.Generation)
	if err := settle(ctx, st, name, change.Generation, timeout); err != nil {
		return err
	}

	if _, err := st.Delete(ctx, name); err != nil {
		return err
	}
	final, err := watch(ctx, st, name, timeout, func(s workflows.ClusterStatus) bool { return s.Phase == workflows.PhaseDeleted })
	if err != nil {
		return err
	}
	fmt.Printf("%s: %s\n", name, final.Phase)
	return nil
}

// clusterYAML is a controller and two workers that depend on it.
func clusterYAML(name string) string {
	return fmt.Sprintf(`name: %s
roles:
  - name: controller
    members: 1
    startscript: member.sh
  - name: worker
    members: 2
    dependsOn: [controller]
    startscript: member.sh
`, name)
}

// settle waits until the cluster is done with generation g, and fails unless it is ready.
func settle(ctx context.Context, st *starter.Starter, name string, g int, timeout time.Duration) error {
	final, err := watch(ctx, st, name, timeout, func(s workflows.ClusterStatus) bool { return s.Settled(g) })
	if err != nil {
		return err
	}
	if final.Phase != workflows.PhaseReady {
		return fmt.Errorf("cluster %s settled %s, not ready: %s", name, final.Phase, final.Message)
	}
	fmt.Printf("%s: %s, generation %d, %d members ready\n", name, final.Phase, final.AttemptedGeneration, ready(final))
	return nil
}

// watch prints each phase the cluster passes through until done says it is over.
func watch(ctx context.Context, st *starter.Starter, name string, timeout time.Duration, done func(workflows.ClusterStatus) bool) (workflows.ClusterStatus, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	last := workflows.Phase("")
	final, err := st.Watch(ctx, name, starter.WatchOptions{
		Until: done,
		OnChange: func(s workflows.ClusterStatus) {
			if s.Phase != last {
				fmt.Printf("  %s: %s\n", name, s.Phase)
				last = s.Phase
			}
		},
	})
	if errors.Is(err, context.DeadlineExceeded) {
		return final, fmt.Errorf("cluster %s: still %s after %s", name, final.Phase, timeout)
	}
	return final, err
}

func ready(s workflows.ClusterStatus) int {
	n := 0
	for _, r := range s.Roles {
		n += r.Ready
	}
	return n
}
