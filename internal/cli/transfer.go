package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/clusterflow/clusterflow/internal/apperr"
	"github.com/clusterflow/clusterflow/internal/atomicfile"
	"github.com/clusterflow/clusterflow/workflows"
)

// exportTimeout bounds export's wait for the operations running outside maintenance.
const exportTimeout = 10 * time.Minute

func runExport(ctx context.Context, args []string) error {
	fs := newFlagSet("export", "(--all | NAME...) [-o FILE] [--timeout D] | --retire NAME...")
	var conn connection
	conn.register(fs, "warn")
	all := fs.Bool("all", false, "export every running cluster")
	file := fs.StringP("output", "o", "-", "write the export to FILE (- is standard output)")
	timeout := fs.Duration("timeout", exportTimeout, "outside maintenance, give up waiting for a cluster's operation to end after this long")
	retire := fs.Bool("retire", false, "close the named clusters as exported, without teardown, after their import elsewhere (only after an export taken in the maintenance now on)")
	if err := fs.Parse(args); err != nil {
		return flagError(err)
	}
	names := fs.Args()
	switch {
	case *retire && (*all || len(names) == 0):
		return apperr.Errorf(apperr.Invalid, "--retire: name the clusters to retire (--all is not allowed with it)")
	case !*retire && *all && len(names) > 0:
		return apperr.Errorf(apperr.Invalid, "--all: give either --all or cluster names, not both")
	case !*retire && !*all && len(names) == 0:
		return apperr.Errorf(apperr.Invalid, "export: name the clusters to export, or give --all")
	case *timeout <= 0:
		return apperr.Errorf(apperr.Invalid, "--timeout: must be positive")
	}
	st, _, closeClient, err := conn.starter(ctx)
	if err != nil {
		return err
	}
	defer closeClient()
	if *retire {
		retired, err := st.Retire(ctx, names)
		for _, s := range retired {
			fmt.Printf("Cluster %s is %s: %s\n", s.Name, s.Phase, s.Message)
		}
		return err
	}
	exportCtx, cancel := context.WithTimeout(ctx, *timeout)
	defer cancel()
	export, err := st.Export(exportCtx, names, *all)
	if err != nil {
		return err
	}
	exported := len(export.Clusters)
	if export, err = st.Seal(export); err != nil {
		return err
	}
	data, err := json.MarshalIndent(export, "", "  ")
	if err != nil {
		return err
	}
	data = append(data, '\n')
	if *file == "-" {
		_, err = os.Stdout.Write(data)
		return err
	}
	// The export holds the clusters' scripts and environment: the owner's eyes only.
	if err := atomicfile.Write(*file, data, 0o600); err != nil {
		return fmt.Errorf("--output: %w", err)
	}
	fmt.Fprintf(os.Stderr, "Exported %d clusters to %s.\n", exported, *file)
	return nil
}

func runImport(ctx context.Context, args []string) error {
	fs := newFlagSet("import", "-f FILE [--dry-run] [-o json]")
	var conn connection
	conn.register(fs, "warn")
	file := fs.StringP("file", "f", "", "the export to import (- is standard input)")
	dryRun := fs.Bool("dry-run", false, "check the file against this server and print what would be imported; start nothing")
	out := outputFlag(fs)
	if err := fs.Parse(args); err != nil {
		return flagError(err)
	}
	if *file == "" {
		return apperr.Errorf(apperr.Invalid, "--file: name the export to import")
	}
	if fs.NArg() > 0 {
		return apperr.Errorf(apperr.Invalid, "import takes no arguments; give the file with -f")
	}
	export, err := readExport(*file)
	if err != nil {
		return err
	}
	st, _, closeClient, err := conn.starter(ctx)
	if err != nil {
		return err
	}
	defer closeClient()
	report, err := st.Import(ctx, export, *dryRun)
	if err != nil {
		return err
	}
	if *out == "json" {
		return printJSON(report)
	}
	verb := "Imported"
	if *dryRun {
		verb = "Would import"
		if !report.Maintenance.On {
			fmt.Println("Maintenance is off on this server: turn it on before the import itself.")
		}
	}
	for _, c := range report.Clusters {
		where := ""
		if len(c.Hosts) > 0 {
			where = " on " + strings.Join(c.Hosts, ", ")
		}
		fmt.Printf("%s cluster %s: %d members%s, generation %d, %s; held by maintenance until it ends, no script run.\n", verb, c.Name, c.Members, where, c.Generation, c.Phase)
	}
	return nil
}

// readExport reads an export file strictly: an unknown field is a mistake, not something
// to drop silently.
func readExport(path string) (workflows.ExportFile, error) {
	var data []byte
	var err error
	if path == "-" {
		data, err = io.ReadAll(os.Stdin)
	} else {
		data, err = os.ReadFile(path)
	}
	if err != nil {
		return workflows.ExportFile{}, apperr.Errorf(apperr.Invalid, "--file: %v", err)
	}
	var export workflows.ExportFile
	// The version first, so that a file of another version is refused as such.
	var header struct {
		Format string `json:"format"`
	}
	if err := json.Unmarshal(data, &header); err != nil {
		return export, apperr.Errorf(apperr.Invalid, "--file %s: not a clusterflow export: %v", path, err)
	}
	if header.Format != workflows.ExportFormat {
		return export, apperr.Errorf(apperr.Invalid, "--file %s: format %q is not one this clusterflow reads (%s)", path, header.Format, workflows.ExportFormat)
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&export); err != nil {
		return export, apperr.Errorf(apperr.Invalid, "--file %s: not a clusterflow export: %v", path, err)
	}
	return export, nil
}
