package workflows

import "time"

// Actions, as Juju's actions and BOSH's errands: a role declares named actions
// (roles[].actions), and `clusterflow run` runs one on chosen members, its script called
// as --action NAME --param k=v ....
const (
	// RunActionUpdate runs an action (ActionRequest) and returns its ActionStatus once
	// accepted; the status query's Actions follow it.
	RunActionUpdate = "run-action"

	// The states of an action's run.
	ActionPending  = "pending"
	ActionRunning  = "running"
	ActionDone     = "done"
	ActionCanceled = "canceled"
)

// ActionRequest asks for an action on members: those named, or every ready member of
// Role, or, with neither, of every role that declares it.
type ActionRequest struct {
	Action  string   `json:"action"`
	Role    string   `json:"role,omitempty"`
	Members []string `json:"members,omitempty"`
	// Params are k=v, passed to the script as --param k=v.
	Params []string `json:"params,omitempty"`
	// Parallel is how many members run it at once; 0: all.
	Parallel int    `json:"parallel,omitempty"`
	By       string `json:"by,omitempty"`
}

// ActionStatus is an action's run: what was asked, and how it went on each member.
type ActionStatus struct {
	ID       int       `json:"id"`
	Action   string    `json:"action"`
	Role     string    `json:"role,omitempty"`
	Members  []string  `json:"members,omitempty"`
	Params   []string  `json:"params,omitempty"`
	Parallel int       `json:"parallel,omitempty"`
	By       string    `json:"by,omitempty"`
	State    string    `json:"state"`
	Asked    time.Time `json:"asked"`
	Ended    time.Time `json:"ended,omitzero"`
	// Ran counts the members it ran on, Succeeded and Failed how they ended; Results
	// holds the first ReportNames of them, failures first.
	Ran       int            `json:"ran"`
	Succeeded int            `json:"succeeded"`
	Failed    int            `json:"failed"`
	Results   []ActionResult `json:"results,omitempty"`
}

// ActionResult is how an action ended on one member: its detail (exit code and time, or
// the failure) and the tails of its output; the whole output is `logs --event ACTION`.
type ActionResult struct {
	Member     string `json:"member"`
	OK         bool   `json:"ok"`
	Detail     string `json:"detail"`
	StdoutTail string `json:"stdoutTail,omitempty"`
	StderrTail string `json:"stderrTail,omitempty"`
}

// Action finds the action run with the given ID among those the status lists.
func (s ClusterStatus) Action(id int) *ActionStatus {
	for i := range s.Actions {
		if s.Actions[i].ID == id {
			return &s.Actions[i]
		}
	}
	return nil
}
