package flow

import (
	"reflect"
	"runtime"
	"strings"

	"github.com/clusterflow/clusterflow/workflows"
)

// The activities' names, as the SDK names a registered method: checked by the compiler
// against the contract, so a renamed method cannot leave a workflow asking for an
// activity no worker has.
var (
	ActCheckInHost        = activityName(workflows.ActivityContract.CheckInHost)
	ActHoldHostLease      = activityName(workflows.ActivityContract.HoldHostLease)
	ActWriteClusterFiles  = activityName(workflows.ActivityContract.WriteClusterFiles)
	ActCreateMember       = activityName(workflows.ActivityContract.CreateMember)
	ActRemoveMember       = activityName(workflows.ActivityContract.RemoveMember)
	ActListMembers        = activityName(workflows.ActivityContract.ListMembers)
	ActListMemberOrdinals = activityName(workflows.ActivityContract.ListMemberOrdinals)
	ActRemoveCluster      = activityName(workflows.ActivityContract.RemoveCluster)
	ActAssignPorts        = activityName(workflows.ActivityContract.AssignPorts)
	ActRunStartscript     = activityName(workflows.ActivityContract.RunStartscript)
	ActStopScript         = activityName(workflows.ActivityContract.StopScript)
	ActReadMemberLog      = activityName(workflows.ActivityContract.ReadMemberLog)
	ActDescribeMember     = activityName(workflows.ActivityContract.DescribeMember)
	ActListHostClusters   = activityName(workflows.ActivityContract.ListHostClusters)
	ActSignalAll          = activityName(workflows.ActivityContract.SignalAll)
	ActRecheckMember      = activityName(workflows.ActivityContract.RecheckMember)
)

// activityName is a method expression's method name.
func activityName(method any) string {
	full := runtime.FuncForPC(reflect.ValueOf(method).Pointer()).Name()
	return strings.TrimSuffix(full[strings.LastIndex(full, ".")+1:], "-fm")
}
