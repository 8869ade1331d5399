package workflows

// Changes to live workflow logic, each checked with workflow.GetVersion so that histories
// recorded before the change replay as they ran.
const (
	// changeLaunchCreatesSandbox: the configure launch creates the member's sandbox itself,
	// one activity per member instead of two (CreateMember, then RunStartscript).
	changeLaunchCreatesSandbox = "launch-creates-sandbox"
)
