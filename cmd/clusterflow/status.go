package main

import (
	"context"
	"encoding/json"
	"os"
	"time"

	"github.com/clusterflow/clusterflow/internal/render"
)

func runStatus(ctx context.Context, args []string) error {
	fs := newFlagSet("status", "NAME [-o json]")
	var conn connection
	conn.register(fs, "warn")
	out := outputFlag(fs)
	name, st, closeClient, err := clusterCommand(ctx, fs, &conn, args)
	if err != nil {
		return err
	}
	defer closeClient()
	status, err := st.Status(ctx, name)
	if err != nil {
		return err
	}
	if *out == "json" {
		return printJSON(status)
	}
	render.Status(os.Stdout, status, time.Now())
	return nil
}

func printJSON(v any) error {
	enc := json.NewEncoder(os.Stdout)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}
