package main

import (
	"context"
	"fmt"
	"strings"

	"github.com/clusterflow/clusterflow/starter"
)

func runSetup(ctx context.Context, args []string) error {
	fs := newFlagSet("setup", "")
	var conn connection
	conn.register(fs, "warn")
	if err := fs.Parse(args); err != nil {
		return flagError(err)
	}
	st, closeClient, err := conn.starter(ctx)
	if err != nil {
		return err
	}
	defer closeClient()
	co, err := starter.ClientOptions(starter.ConnectOptions{Address: conn.address, Namespace: conn.namespace})
	if err != nil {
		return err
	}
	res, err := st.Setup(ctx, co.Namespace)
	if err != nil {
		return err
	}
	if len(res.Added) > 0 {
		fmt.Printf("Registered search attributes in namespace %q: %s\n", co.Namespace, strings.Join(res.Added, ", "))
	}
	if len(res.Present) > 0 {
		fmt.Printf("Already present in namespace %q: %s\n", co.Namespace, strings.Join(res.Present, ", "))
	}
	return nil
}
