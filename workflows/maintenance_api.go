package workflows

import (
	"fmt"
	"time"

	"github.com/clusterflow/clusterflow/internal/apperr"
	"github.com/clusterflow/clusterflow/spec"
)

// The maintenance and transfer contract. One entity workflow, MaintenanceWorkflowID, keeps
// the fleet's maintenance flag in Temporal, so every worker and CLI sees the same one; it
// tells every running cluster and the host registry whenever the flag changes. Export
// reads a cluster whole; import starts a cluster workflow from what export read.
const (
	MaintenanceWorkflowName = "MaintenanceWorkflow"
	MaintenanceWorkflowID   = "clusterflow-maintenance"

	// MaintenanceQuery returns the Maintenance.
	MaintenanceQuery = "maintenance"
	// SetMaintenanceUpdate takes a MaintenanceRequest and returns a MaintenanceResult once
	// every running cluster has been told.
	SetMaintenanceUpdate = "set-maintenance"
	// MaintenanceSignal gives a cluster or the host registry the current Maintenance.
	MaintenanceSignal = "maintenance"

	// ExportUpdate returns a cluster's ClusterExport. It is refused while an operation
	// runs. Taken in maintenance, it also marks the cluster as exported, which RetireUpdate
	// requires.
	ExportUpdate = "export"
	// RetireUpdate closes a cluster exported in the current maintenance, with the phase
	// exported and no teardown: its members now belong to the server it was imported into.
	RetireUpdate = "retire"

	// ExportFormat names the export file's format and version.
	ExportFormat = "clusterflow/v1"
)

// PhaseMaintenance is the phase shown while maintenance holds a cluster; PhaseExported is
// the last phase of a cluster retired after a move.
const (
	PhaseMaintenance Phase = "maintenance"
	PhaseExported    Phase = "exported"
)

// Maintenance is the fleet's maintenance flag. While it is on, changes are refused,
// automatic replacement and reconcile pause, and running operations stop at their next
// member or level; deletes still run.
type Maintenance struct {
	On     bool      `json:"on"`
	Reason string    `json:"reason,omitempty"`
	Since  time.Time `json:"since,omitzero"`
}

// MaintenanceRequest turns maintenance on, with a reason, or off.
type MaintenanceRequest struct {
	On     bool   `json:"on"`
	Reason string `json:"reason,omitempty"`
}

// MaintenanceResult is the flag after a change, and how many clusters were told of it.
type MaintenanceResult struct {
	Maintenance
	Clusters int `json:"clusters"`
}

// Refusal is the error that refuses what to do while maintenance is on.
func (m Maintenance) Refusal(what string) error {
	return apperr.Errorf(apperr.Maintenance, "%s refused: %s; `clusterflow maintenance off` ends it", what, m.Describe())
}

// Describe says since when and why maintenance is on.
func (m Maintenance) Describe() string {
	text := "maintenance is on since " + m.Since.UTC().Format(time.RFC3339)
	if m.Reason != "" {
		text += fmt.Sprintf(" (%s)", m.Reason)
	}
	return text
}

// ExportFile is the document `clusterflow export` writes and `clusterflow import` reads.
type ExportFile struct {
	Format   string          `json:"format"`
	Clusters []ClusterExport `json:"clusters"`
	// Sealed holds the clusters instead, as one payload encoded by the exporting client's
	// codec (a protobuf Payload), when it has one: an export is no plainer than the history
	// it came from. Import opens it with the same keys.
	Sealed []byte `json:"sealed,omitempty"`
}

// ClusterExport is one cluster as export read it: its desired spec with the scripts, and
// the whole state its workflow carries across continue-as-new (every member with its
// host, state, since, health history and deadlines as absolute times; the members removed
// but not yet announced; the roles an apply is removing).
type ClusterExport struct {
	Name       string       `json:"name"`
	Phase      Phase        `json:"phase"`
	Generation int          `json:"generation"`
	Spec       spec.Cluster `json:"spec"`
	Carried    Carried      `json:"carried"`
	// CarriedGzip carries a large Carried through Temporal, gzipped (see ClusterInput); the
	// starter unpacks it (Unpack), so an export file always holds Carried.
	CarriedGzip []byte `json:"carriedGzip,omitempty"`
	// InMaintenance says the export was taken while maintenance was on, so nothing could
	// change after it; only such an export lets the source retire the cluster.
	InMaintenance bool `json:"inMaintenance"`
}

// MaintenanceInput carries the flag across continue-as-new.
type MaintenanceInput struct {
	Maintenance Maintenance `json:"maintenance"`
}

// Unpack fills Carried from CarriedGzip, as an export file holds it.
func (c *ClusterExport) Unpack() error {
	if len(c.CarriedGzip) == 0 {
		return nil
	}
	carried, err := ClusterInput{CarriedGzip: c.CarriedGzip}.ReadCarried()
	if err != nil {
		return fmt.Errorf("cluster %s: %w", c.Name, err)
	}
	c.Carried, c.CarriedGzip = *carried, nil
	return nil
}

// MemberList is every member of an exported cluster, role by role.
func (c ClusterExport) MemberList() []Member {
	var members []Member
	for _, rs := range c.Carried.State.Roles {
		members = append(members, rs.Members...)
	}
	return members
}

// Adopt is the input that starts an exported cluster's workflow on the target, held by the
// target's maintenance: the run goes on from the exported state, as after a continue-as-new.
func (c ClusterExport) Adopt(m Maintenance) (ClusterInput, error) {
	carried := c.Carried
	carried.State.Maintenance = &m
	in := ClusterInput{Spec: c.Spec}
	err := in.Carry(carried)
	return in, err
}

// Pack puts the exported state in the export as a continue-as-new would carry it: an
// update's result is one payload, as a workflow input is.
func (c *ClusterExport) Pack(carried Carried) error {
	plain, packed, err := packCarried(carried, PayloadSize(c.Spec))
	if plain != nil {
		c.Carried = *plain
	}
	c.CarriedGzip = packed
	return err
}
