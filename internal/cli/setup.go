package cli

import (
	"context"
	"fmt"
	"strings"
)

func runSetup(ctx context.Context, args []string) error {
	fs := newFlagSet("setup", "")
	var conn connection
	conn.register(fs, "warn")
	if err := fs.Parse(args); err != nil {
		return flagError(err)
	}
	st, co, closeClient, err := conn.starter(ctx)
	if err != nil {
		return err
	}
	defer closeClient()
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
