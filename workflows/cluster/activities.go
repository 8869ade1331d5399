package cluster

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
	actCheckInHost        = activityName(workflows.ActivityContract.CheckInHost)
	actHoldHostLease      = activityName(workflows.ActivityContract.HoldHostLease)
	actWriteClusterFiles  = activityName(workflows.ActivityContract.WriteClusterFiles)
	actCreateMember       = activityName(workflows.ActivityContract.CreateMember)
	actRemoveMember       = activityName(workflows.ActivityContract.RemoveMember)
	actListMembers        = activityName(workflows.ActivityContract.ListMembers)
	actListMemberOrdinals = activityName(workflows.ActivityContract.ListMemberOrdinals)
	actRemoveCluster      = activityName(workflows.ActivityContract.RemoveCluster)
	actAssignPorts        = activityName(workflows.ActivityContract.AssignPorts)
	actRunStartscript     = activityName(workflows.ActivityContract.RunStartscript)
	actStopScript         = activityName(workflows.ActivityContract.StopScript)
	actReadMemberLog      = activityName(workflows.ActivityContract.ReadMemberLog)
	actListHostClusters   = activityName(workflows.ActivityContract.ListHostClusters)
	actSignalAll          = activityName(workflows.ActivityContract.SignalAll)
)

// activityName is a method expression's method name.
func activityName(method any) string {
	full := runtime.FuncForPC(reflect.ValueOf(method).Pointer()).Name()
	return strings.TrimSuffix(full[strings.LastIndex(full, ".")+1:], "-fm")
}
