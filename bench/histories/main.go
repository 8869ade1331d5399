// Command histories checks the bounds that scale depends on, for every workflow on a
// Temporal server (internal/histories): the events and bytes of each history, its largest
// event and its largest workflow task. It prints the largest of each, and exits 1 when one
// passes the bounds the reference states (docs/reference.md).
//
//	go run ./bench/histories
package main

import (
	"context"
	"fmt"
	"os"

	"go.temporal.io/sdk/client"

	"github.com/clusterflow/clusterflow/internal/histories"
	"github.com/clusterflow/clusterflow/starter"
)

func main() {
	co, _, err := starter.ClientOptions(starter.ConnectOptions{})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	c, err := client.Dial(co)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	defer c.Close()
	sizes, err := histories.Measure(context.Background(), c, "default", "")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	fmt.Println(sizes)
	fmt.Println("largest event by type:", sizes.ByType())
	if !sizes.Within(histories.Bounds) {
		b := histories.Bounds
		fmt.Printf("over the bounds: %d events or %d bytes a history, %d bytes an event, %d bytes a task\n", b.Events, b.Bytes, b.Event, b.Task)
		os.Exit(1)
	}
}
