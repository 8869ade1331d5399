package starter

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	commonpb "go.temporal.io/api/common/v1"
	"go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/converter"
	"google.golang.org/protobuf/proto"

	"github.com/clusterflow/clusterflow/internal/apperr"
	"github.com/clusterflow/clusterflow/internal/payloadlimit"
	"github.com/clusterflow/clusterflow/spec"
	"github.com/clusterflow/clusterflow/workflows"
)

// Export reads the named clusters, or every running one with all, into one document. Each
// cluster is read between operations: outside maintenance Export waits for the one
// running to end, until ctx ends; in maintenance operations stop at their next member.
// The same state gives the same bytes.
func (s *Starter) Export(ctx context.Context, names []string, all bool) (workflows.ExportFile, error) {
	file := workflows.ExportFile{Format: workflows.ExportFormat, Clusters: []workflows.ClusterExport{}}
	if all {
		running, err := s.List(ctx, false)
		if err != nil {
			return file, err
		}
		for _, c := range running {
			names = append(names, c.Name)
		}
	}
	slices.Sort(names)
	for _, name := range slices.Compact(names) {
		c, err := s.exportOne(ctx, name)
		if err != nil {
			return file, err
		}
		file.Clusters = append(file.Clusters, c)
	}
	return file, nil
}

// Seal returns the file with its clusters encoded by the client's codec, when the client
// has one, so that the file holds no more plain text than the server does. Without a codec
// the file is returned as it is.
func (s *Starter) Seal(file workflows.ExportFile) (workflows.ExportFile, error) {
	p, err := payloadlimit.Unguarded(s.dataConverter).ToPayload(file.Clusters)
	if err != nil {
		return file, fmt.Errorf("seal the export: %w", err)
	}
	if string(p.GetMetadata()[converter.MetadataEncoding]) == converter.MetadataEncodingJSON {
		return file, nil // no codec
	}
	sealed, err := proto.Marshal(p)
	if err != nil {
		return file, fmt.Errorf("seal the export: %w", err)
	}
	return workflows.ExportFile{Format: file.Format, Clusters: []workflows.ClusterExport{}, Sealed: sealed}, nil
}

// unseal opens a sealed file with the client's codec.
func (s *Starter) unseal(file workflows.ExportFile) (workflows.ExportFile, error) {
	if len(file.Sealed) == 0 {
		return file, nil
	}
	var p commonpb.Payload
	if err := proto.Unmarshal(file.Sealed, &p); err != nil {
		return file, apperr.Errorf(apperr.Invalid, "import refused: the sealed clusters are not a payload: %v", err)
	}
	var clusters []workflows.ClusterExport
	if err := payloadlimit.Unguarded(s.dataConverter).FromPayload(&p, &clusters); err != nil {
		return file, apperr.Errorf(apperr.Invalid, "import refused: the file was sealed by its exporter's codec and does not open here: %v", err)
	}
	return workflows.ExportFile{Format: file.Format, Clusters: clusters}, nil
}

// exportPoll is how often Export asks again a cluster that is running an operation.
const exportPoll = 250 * time.Millisecond

func (s *Starter) exportOne(ctx context.Context, name string) (workflows.ClusterExport, error) {
	for {
		var c workflows.ClusterExport
		err := s.update(ctx, name, workflows.ExportUpdate, &c)
		if err == nil {
			err = c.Unpack()
		}
		if !apperr.Is(err, apperr.Unavailable) {
			return c, err
		}
		select {
		case <-ctx.Done():
			return c, apperr.Errorf(apperr.Unavailable, "export %s: gave up waiting for its operation to end (%v); turn maintenance on to stop it at its next member", name, err)
		case <-time.After(exportPoll):
		}
	}
}

// ImportReport says what an import did, or would do with DryRun.
type ImportReport struct {
	DryRun   bool              `json:"dryRun"`
	Clusters []ImportedCluster `json:"clusters"`
	// Maintenance is this server's: a dry run works without it, the import does not.
	Maintenance workflows.Maintenance `json:"maintenance"`
}

// ImportedCluster is one cluster an import adopted.
type ImportedCluster struct {
	Name       string          `json:"name"`
	Phase      workflows.Phase `json:"phase"`
	Generation int             `json:"generation"`
	Members    int             `json:"members"`
	Hosts      []string        `json:"hosts,omitempty"`
}

// Import starts a workflow for each cluster of an export, adopting its members as they
// are: no script runs. Only in maintenance, which holds the adopted clusters until it
// ends. It refuses the whole file, naming every problem, when any cluster is live here,
// has members on hosts this server does not know, or fails validation; nothing starts then.
func (s *Starter) Import(ctx context.Context, file workflows.ExportFile, dryRun bool) (ImportReport, error) {
	report := ImportReport{DryRun: dryRun, Clusters: []ImportedCluster{}}
	if file.Format != workflows.ExportFormat {
		return report, apperr.Errorf(apperr.Invalid, "import refused: format %q is not one this clusterflow reads (%s)", file.Format, workflows.ExportFormat)
	}
	file, err := s.unseal(file)
	if err != nil {
		return report, err
	}
	if dryRun {
		report.Maintenance, err = s.Maintenance(ctx)
	} else {
		report.Maintenance, err = s.requireMaintenance(ctx, "import")
	}
	if err != nil {
		return report, err
	}
	hosts, err := s.hostsOnceUp(ctx)
	if err != nil {
		return report, err
	}
	var problems []apperr.Problem
	seen := map[string]bool{}
	for i, c := range file.Clusters {
		path := fmt.Sprintf("clusters[%d]", i)
		for _, p := range checkExport(c, hosts) {
			problems = append(problems, apperr.Problem{Path: path, Message: p})
		}
		if seen[c.Name] {
			problems = append(problems, apperr.Problem{Path: path, Message: fmt.Sprintf("cluster %s is in the file twice", c.Name)})
		}
		seen[c.Name] = true
		live, err := s.isLive(ctx, c.Name)
		if err != nil {
			return report, err
		}
		if live {
			problems = append(problems, apperr.Problem{Path: path, Message: fmt.Sprintf("cluster %s is live on this server", c.Name)})
		}
		report.Clusters = append(report.Clusters, imported(c))
	}
	if len(problems) > 0 {
		lines := make([]string, len(problems))
		for i, p := range problems {
			lines[i] = p.String()
		}
		return report, &apperr.Error{Code: apperr.Invalid, Problems: problems,
			Message: "import refused, nothing started:\n  " + strings.Join(lines, "\n  ")}
	}
	if dryRun {
		return report, nil
	}
	for i, c := range file.Clusters {
		in, err := c.Adopt(report.Maintenance)
		if err == nil {
			err = s.startCluster(ctx, c.Spec, workflows.PhaseMaintenance, in)
		}
		if err != nil {
			report.Clusters = report.Clusters[:i]
			return report, fmt.Errorf("import %s (the clusters before it were imported): %w", c.Name, err)
		}
	}
	return report, nil
}

func imported(c workflows.ClusterExport) ImportedCluster {
	out := ImportedCluster{Name: c.Name, Phase: c.Phase, Generation: c.Generation}
	for _, m := range c.MemberList() {
		if m.State == workflows.MemberDeleted {
			continue
		}
		out.Members++
		if m.Host != "" && !slices.Contains(out.Hosts, m.Host) {
			out.Hosts = append(out.Hosts, m.Host)
		}
	}
	slices.Sort(out.Hosts)
	return out
}

// checkExport lists what is wrong with one exported cluster: names that do not match,
// a spec that cannot run, members of unknown roles or on hosts this server does not know.
func checkExport(c workflows.ClusterExport, hosts []workflows.Host) []string {
	var problems []string
	if err := spec.CheckName(c.Name); err != nil {
		problems = append(problems, fmt.Sprintf("name %q: %v", c.Name, err))
	}
	if c.Spec.Name != c.Name {
		problems = append(problems, fmt.Sprintf("cluster %s: its spec is for cluster %q", c.Name, c.Spec.Name))
	}
	if c.Carried.State.Name != c.Name {
		problems = append(problems, fmt.Sprintf("cluster %s: its state is of cluster %q", c.Name, c.Carried.State.Name))
	}
	if _, err := spec.Levels(c.Spec.Roles); err != nil {
		problems = append(problems, fmt.Sprintf("cluster %s: spec: %v", c.Name, err))
	}
	for _, r := range slices.Concat(c.Spec.Roles, c.Carried.Retiring) {
		if _, ok := c.Spec.Scripts[r.ScriptHash]; !ok {
			problems = append(problems, fmt.Sprintf("cluster %s: role %s: its startscript is missing from the spec", c.Name, r.Name))
		}
	}
	unknownHosts := map[string][]string{}
	for _, m := range c.MemberList() {
		role, _, ok := spec.ParseMemberName(c.Name, m.Name)
		_, inSpec := c.Spec.Role(m.Role)
		retiring := slices.ContainsFunc(c.Carried.Retiring, func(r spec.Role) bool { return r.Name == m.Role })
		switch {
		case !ok || role != m.Role:
			problems = append(problems, fmt.Sprintf("cluster %s: member %q is not named as a member of role %s", c.Name, m.Name, m.Role))
		case !inSpec && !retiring:
			problems = append(problems, fmt.Sprintf("cluster %s: member %s belongs to role %s, which its spec does not have", c.Name, m.Name, m.Role))
		}
		if m.Host != "" && m.State != workflows.MemberDeleted && !slices.ContainsFunc(hosts, func(h workflows.Host) bool { return h.Name == m.Host }) {
			unknownHosts[m.Host] = append(unknownHosts[m.Host], m.Name)
		}
	}
	for _, h := range slices.Sorted(maps.Keys(unknownHosts)) {
		problems = append(problems, fmt.Sprintf("cluster %s: members %s are on host %s, which this server does not know (start its worker with --host %s first)", c.Name, strings.Join(unknownHosts[h], ", "), h, h))
	}
	return problems
}

// isLive reports whether the cluster's workflow runs on this server.
func (s *Starter) isLive(ctx context.Context, name string) (bool, error) {
	desc, err := s.client.DescribeWorkflowExecution(ctx, workflows.ClusterWorkflowID(name), "")
	switch {
	case isNotFound(err):
		return false, nil
	case err != nil:
		return false, fmt.Errorf("look for cluster %s: %w", name, err)
	}
	return desc.GetWorkflowExecutionInfo().GetStatus() == enums.WORKFLOW_EXECUTION_STATUS_RUNNING, nil
}

// Retire closes the named clusters' workflows as exported, without teardown, once each
// was exported during the maintenance now on: their members belong to the server the
// export was imported into. It returns each cluster's last status.
func (s *Starter) Retire(ctx context.Context, names []string) ([]workflows.ClusterStatus, error) {
	var out []workflows.ClusterStatus
	var errs []error
	for _, name := range names {
		var status workflows.ClusterStatus
		err := s.update(ctx, name, workflows.RetireUpdate, &status)
		if err == nil {
			err = s.client.GetWorkflow(ctx, workflows.ClusterWorkflowID(name), "").Get(ctx, &status)
		}
		if err != nil {
			errs = append(errs, err)
			continue
		}
		out = append(out, status)
	}
	return out, errors.Join(errs...)
}
