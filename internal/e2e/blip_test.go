package e2e

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/clusterflow/clusterflow/internal/testenv"
	"github.com/clusterflow/clusterflow/workflows"
)

// A blip moves nothing: three hosts in network namespaces with a host timeout of 10 s, the
// three-level deploy of the host-loss trials, and one host's link cut for half its timeout
// at a random moment of the setup. The host is never lost, so no member may move and no
// script may run twice: each trial ends ready with every member on the host it was placed
// on first, configured there once, and every notification heard once.

// blipTimeout is the hosts' --host-timeout; a cut lasts half of it.
const blipTimeout = 10 * time.Second

func TestABlipShorterThanEveryTimeoutMovesNothing1(t *testing.T) {
	t.Parallel()
	guard(t)
	blipTrials(t, 1, 2)
}
func TestABlipShorterThanEveryTimeoutMovesNothing2(t *testing.T) {
	t.Parallel()
	guard(t)
	blipTrials(t, 2, 2)
}
func TestABlipShorterThanEveryTimeoutMovesNothing3(t *testing.T) {
	t.Parallel()
	guard(t)
	blipTrials(t, 3, 2)
}
func TestABlipShorterThanEveryTimeoutMovesNothing4(t *testing.T) {
	t.Parallel()
	guard(t)
	blipTrials(t, 4, 2)
}
func TestABlipShorterThanEveryTimeoutMovesNothing5(t *testing.T) {
	t.Parallel()
	guard(t)
	blipTrials(t, 5, 2)
}

// blipTrials runs trials on a fleet of its own; set is its share of the ten trials.
func blipTrials(t *testing.T, set, trials int) {
	seed := uint64(time.Now().UnixNano())
	r := rand.New(rand.NewPCG(seed, uint64(set)))
	t.Logf("seed %d", seed)
	f := newFleetWith(t, blipTimeout, "h1", "h2", "h3")
	hosts := []string{"h1", "h2", "h3"}
	for trial := range trials {
		name := fmt.Sprintf("blip%d-%d", set, trial)
		cut := hosts[r.IntN(len(hosts))]
		after := time.Second + time.Duration(r.Int64N(int64(8*time.Second)))
		trace := deployLossCluster(t, f, name)
		var placed []string
		waitFor(t, name+"'s members placed", func() bool {
			placed = placements(f.status(name))
			return len(placed) == 9 && !slices.ContainsFunc(placed, func(p string) bool { return strings.Contains(p, "@=") })
		})
		time.Sleep(after)
		f.hosts[cut].net.Cut()
		time.Sleep(blipTimeout / 2)
		f.hosts[cut].net.Restore()
		var s workflows.ClusterStatus
		waitUpTo(t, 90*time.Second, fmt.Sprintf("%s ready after a blip of %s (cut %s into the deploy)", name, cut, after.Round(time.Millisecond)), func() bool {
			s = f.status(name)
			return s.Phase == workflows.PhaseReady && s.Role("worker").Ready == 6 && s.Role("edge").Ready == 2 && s.Role("controller").Ready == 1
		})
		t.Logf("trial %s: %s cut for %s, %s into the deploy", name, cut, blipTimeout/2, after.Round(time.Millisecond))
		if got := hostsOf(placements(s)); !slices.Equal(got, hostsOf(placed)) {
			t.Errorf("%s: members moved during a blip of %s:\n  placed %v\n  now    %v", name, cut, placed, placements(s))
		}
		lines := readLines(t, trace)
		checkLossTrace(t, name, lines, s)
		started := map[string]int{}
		for _, line := range lines {
			if f := strings.Fields(line); len(f) >= 3 && f[0] == "start" && f[2] == "configure" {
				started[f[1]]++
			}
		}
		for member, n := range started {
			if n != 1 {
				t.Errorf("%s: %s's configure started %d times", name, member, n)
			}
		}
		if t.Failed() {
			t.Logf("%s's trace:\n%s", name, strings.Join(lines, "\n"))
			dumpShard(t, f.address, cut)
			return
		}
		if res := f.cli("delete", name, "--wait"); res.Code != 0 {
			t.Fatalf("delete %s: %s", name, res)
		}
	}
}

// hostsOf keeps "member@host" of placements ("member@host=state"), sorted.
func hostsOf(placements []string) []string {
	var out []string
	for _, p := range placements {
		at, _, _ := strings.Cut(p, "=")
		out = append(out, at)
	}
	slices.Sort(out)
	return out
}

// dumpShard logs the history of the registry shard keeping host: what its lease did.
func dumpShard(t *testing.T, address, host string) {
	c, err := testenv.Dial(address)
	if err != nil {
		t.Log(err)
		return
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	hist, err := testenv.History(ctx, c, workflows.HostShardWorkflowID(workflows.HostShard(host)))
	if err != nil {
		t.Log(err)
		return
	}
	for _, e := range hist.Events {
		t.Logf("%d %s %s %v", e.GetEventId(), e.GetEventTime().AsTime().Format(time.RFC3339Nano), e.GetEventType(), e.GetAttributes())
	}
}
