package workflows_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/mock"
	"go.temporal.io/sdk/testsuite"

	"github.com/clusterflow/clusterflow/workflows"
)

func TestZZProfileMemberPerHost(t *testing.T) {
	fake := newFakeBackend()
	var names []string
	for i := range 2000 {
		names = append(names, fmt.Sprintf("h%d", i+1))
	}
	view := readyHosts(names...)
	env := newEnv(t, fake)
	env.SetTestTimeout(10 * time.Minute)
	env.OnSignalExternalWorkflow(mock.Anything, workflows.HostsWorkflowID, "", workflows.ClusterHostsSignal, mock.Anything).Return(nil)
	var after workflows.ClusterStatus
	queryAt(t, env, 30*time.Minute, &after)
	env.RegisterDelayedCallback(func() {
		env.UpdateWorkflow(workflows.DeleteUpdate, "delete", &testsuite.TestUpdateCallback{
			OnReject: func(err error) { t.Errorf("delete refused: %v", err) }, OnAccept: func() {}, OnComplete: func(any, error) {},
		})
	}, 31*time.Minute)
	start := time.Now()
	env.ExecuteWorkflow(workflows.ClusterWorkflowName, workflows.ClusterInput{Hosts: view, Spec: testSpec(t, `
name: c
roles:
  - {name: worker, members: 2000, maxInFlight: 500, startscript: s.sh, placement: {maxPerHost: 1}}
`)})
	t.Logf("phase %s ready %d in %s", after.Phase, after.Role("worker").Ready, time.Since(start))
}
