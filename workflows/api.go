// Package workflows holds clusterflow's deterministic workflow code: one entity workflow per
// cluster, and a child workflow per role operation so that the cluster's own history grows
// with its roles, not its members.
package workflows

import (
	"strings"

	"go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/temporal"

	"github.com/clusterflow/clusterflow/internal/spec"
)

// The contract shared by workflows, worker and starter.
const (
	DefaultTaskQueue = "clusterflow"

	ClusterWorkflowName = "ClusterWorkflow"
	RoleWorkflowName    = "RoleWorkflow"

	// StatusQuery returns the ClusterStatus that `clusterflow status -o json` prints.
	StatusQuery = "status"
	// DeleteUpdate starts deleting a cluster and returns its status once accepted.
	DeleteUpdate = "delete"
	// RoleProgressSignal carries member changes from a role child to its cluster.
	RoleProgressSignal = "role-progress"

	clusterIDPrefix = "cluster/"
)

// Search attributes set on every cluster workflow.
var (
	ClusterNameKey  = temporal.NewSearchAttributeKeyKeyword("ClusterName")
	ClusterPhaseKey = temporal.NewSearchAttributeKeyKeyword("ClusterPhase")
	// ClusterRolesKey lists the cluster's roles; ClusterMembersKey counts its desired members.
	ClusterRolesKey   = temporal.NewSearchAttributeKeyKeywordList("ClusterRoles")
	ClusterMembersKey = temporal.NewSearchAttributeKeyInt64("ClusterMembers")
	// SearchAttributes lists the custom search attributes a namespace must have registered.
	SearchAttributes = []temporal.SearchAttributeKey{ClusterNameKey, ClusterPhaseKey, ClusterRolesKey, ClusterMembersKey}
)

// SearchAttributeTypes maps each custom search attribute to its type, for registration.
func SearchAttributeTypes() map[string]enums.IndexedValueType {
	types := map[string]enums.IndexedValueType{}
	for _, key := range SearchAttributes {
		types[key.GetName()] = key.GetValueType()
	}
	return types
}

// ClusterWorkflowID is the workflow ID of a cluster's entity workflow.
func ClusterWorkflowID(cluster string) string { return clusterIDPrefix + cluster }

// ClusterNameFromWorkflowID is the reverse of ClusterWorkflowID.
func ClusterNameFromWorkflowID(id string) (string, bool) {
	name, ok := strings.CutPrefix(id, clusterIDPrefix)
	return name, ok && !strings.Contains(name, "/")
}

// ClusterInput starts a cluster workflow.
type ClusterInput struct {
	Spec spec.Cluster `json:"spec"`
}

// RoleOperation is what a role child workflow does to its members.
type RoleOperation string

const (
	OpConfigure RoleOperation = "configure"
	OpTeardown  RoleOperation = "teardown"
)

// RoleInput starts a role child workflow.
type RoleInput struct {
	Cluster   string        `json:"cluster"`
	Operation RoleOperation `json:"operation"`
	Role      spec.Role     `json:"role"`
	// Members are the members to act on, in ordinal order.
	Members []Member `json:"members"`
}

// RoleResult is every member's state once a role operation is over.
type RoleResult struct {
	Members []Member `json:"members"`
}

// RoleProgress reports member changes while a role operation runs.
type RoleProgress struct {
	Role string `json:"role"`
	// Operation is the child workflow ID, so a late report of a finished operation is ignored.
	Operation string   `json:"operation"`
	Members   []Member `json:"members"`
}
