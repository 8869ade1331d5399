package workflows

import "github.com/clusterflow/clusterflow/internal/backend"

// MemberLogWorkflowName reads part of a member's script output on the host holding it:
// a short workflow with one activity is how a client reaches a file on another host.
const MemberLogWorkflowName = "MemberLogWorkflow"

// MemberLogInput says which host to read on ("" in single-host mode) and what.
type MemberLogInput struct {
	Host    string             `json:"host,omitempty"`
	Request backend.LogRequest `json:"request"`
}

// MemberLogWorkflowID names one read of a member's output; id makes each read unique.
func MemberLogWorkflowID(cluster, member, id string) string {
	return "logs/" + cluster + "/" + member + "/" + id
}

// MemberDescribeWorkflowName asks the member's host where the member lives and what it
// ran for it (status --member), as MemberLogWorkflowName reads its output.
const MemberDescribeWorkflowName = "MemberDescribeWorkflow"

// MemberDescribeInput names the host ("" in single-host mode) and the member.
type MemberDescribeInput struct {
	Host   string            `json:"host,omitempty"`
	Member backend.MemberRef `json:"member"`
}

// MemberDescribeWorkflowID names one look at a member; id makes it unique.
func MemberDescribeWorkflowID(cluster, member, id string) string {
	return "describe/" + cluster + "/" + member + "/" + id
}

// OrphansWorkflowName lists the clusters with files on one host, after removing the ones
// asked: the starter decides which are orphans (no running workflow), since that takes a
// client. A short workflow is how a client runs work on another host.
const OrphansWorkflowName = "OrphansWorkflow"

// OrphansInput names the host ("" in single-host mode) and the clusters to remove there.
type OrphansInput struct {
	Host   string   `json:"host,omitempty"`
	Remove []string `json:"remove,omitempty"`
}

// OrphansWorkflowID names one look at a host's clusters; id makes it unique.
func OrphansWorkflowID(host, id string) string { return "orphans/" + host + "/" + id }
