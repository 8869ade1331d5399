package agent

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"go.uber.org/zap"
)

// FaultEnv names the faults an agent injects in itself, for the tests of exactly-once: a
// comma-separated list of [hold-]POINT:EVENT[:CLUSTER]. The first run of EVENT (of a member
// of CLUSTER, when named) to reach POINT kills the agent there with SIGKILL, as a crash at
// that moment would; with hold-, the agent instead waits there while the file
// HeldFile(dir, POINT, EVENT) exists (at most holdLimit), so that a test can kill the
// worker, the server or the agent itself at that moment. Each fault fires once for the
// agent's folder, whatever agents come after. Unset, as in every deployment, it costs nothing.
const FaultEnv = "CLUSTERFLOW_AGENT_FAULTS"

// The moments of a launch's life a fault can strike.
const (
	// FaultSpawned: the script's wrapper was started, held at its gate, and nothing of the
	// run is recorded yet.
	FaultSpawned = "spawned"
	// FaultRecorded: the run is recorded and released; the launch has not been answered.
	FaultRecorded = "recorded"
	// FaultExited: the script exited; its result is not recorded yet.
	FaultExited = "exited"
	// FaultFinished: the result is recorded; it has not been delivered.
	FaultFinished = "finished"
	// FaultDelivered: Temporal took the result (or no longer waits for it); the agent has
	// not forgotten the run yet.
	FaultDelivered = "delivered"
	// FaultLost: the run was found lost and recorded so; the loss is not delivered yet.
	FaultLost = "lost"
)

// holdLimit bounds a held fault's wait: a test that forgets to release it fails, and the
// agent goes on.
const holdLimit = 5 * time.Minute

type fault struct {
	hold                  bool
	point, event, cluster string
}

func (f fault) name() string {
	n := f.point + "-" + f.event
	if f.cluster != "" {
		n += "-" + f.cluster
	}
	if f.hold {
		n = "hold-" + n
	}
	return n
}

// parseFaults reads FaultEnv's value; what it cannot read it reports, and ignores.
func parseFaults(value string, log *zap.Logger) []fault {
	var faults []fault
	for _, item := range strings.Split(value, ",") {
		if item = strings.TrimSpace(item); item == "" {
			continue
		}
		var f fault
		rest, hold := strings.CutPrefix(item, "hold-")
		parts := strings.Split(rest, ":")
		if len(parts) < 2 || len(parts) > 3 || parts[0] == "" || parts[1] == "" {
			log.Warn("Ignoring a fault that is not [hold-]POINT:EVENT[:CLUSTER]", zap.String("fault", item))
			continue
		}
		f.hold, f.point, f.event = hold, parts[0], parts[1]
		if len(parts) == 3 {
			f.cluster = parts[2]
		}
		faults = append(faults, f)
	}
	return faults
}

// HeldFile is the file a held fault waits on.
func HeldFile(dir, point, event string) string {
	return filepath.Join(dir, "faults", "held-"+point+"-"+event)
}

// fault strikes, if one is set for this point of this run: see FaultEnv.
func (a *Agent) fault(point, member, event string) {
	for _, f := range a.faults {
		if f.point != point || f.event != event || (f.cluster != "" && !strings.HasPrefix(member, f.cluster+"-")) {
			continue
		}
		fired := filepath.Join(a.opts.Dir, "faults", "fired-"+f.name())
		if err := os.MkdirAll(filepath.Dir(fired), 0o700); err != nil {
			continue
		}
		// O_EXCL: the fault fires for the one run that makes the file.
		file, err := os.OpenFile(fired, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o600)
		if err != nil {
			continue
		}
		fmt.Fprintf(file, "%s %s\n", member, time.Now().Format(time.RFC3339Nano))
		file.Close()
		if f.hold {
			held := HeldFile(a.opts.Dir, point, event)
			_ = os.WriteFile(held, []byte(member+"\n"), 0o600)
			a.log.Warn("Fault: holding", zap.String("point", point), zap.String("member", member), zap.String("event", event))
			for deadline := time.Now().Add(holdLimit); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
				if _, err := os.Stat(held); err != nil {
					break
				}
			}
			continue
		}
		a.log.Warn("Fault: the agent kills itself", zap.String("point", point), zap.String("member", member), zap.String("event", event))
		_ = a.opts.Logger.Sync()
		_ = syscall.Kill(os.Getpid(), syscall.SIGKILL)
		select {} // SIGKILL is not handled: this never returns
	}
}
