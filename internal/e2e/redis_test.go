package e2e

import (
	"fmt"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/clusterflow/clusterflow/workflows"
)

// The Redis Cluster example (examples/redis) runs through the real CLI in two tests, each
// from its own deploy of six servers and the admin that makes them a cluster, and each
// reads every key back after every step. They are two because each moves thousands of
// slots or waits out a failover: one test of the whole lifecycle took over a minute idle
// and past the suite's three minutes a test on a busy CI machine.

// TestRedisKeepsEveryKeyThroughAGrowAndAGracefulShrink: a grow to eight (the admin adds
// the joiners as masters and moves slots to them), a graceful shrink to six (the admin moves
// the leavers' slots off in removing, while they still run), and a delete that leaves no
// redis running.
func TestRedisKeepsEveryKeyThroughAGrowAndAGracefulShrink(t *testing.T) {
	t.Parallel()
	guard(t)
	r := deployRedis(t, "redisg")
	r.masters("the deploy", 3) // each with a replica
	r.step("grow to 8", "resize", r.name, "redis=8", "--wait")
	r.everyKey("the grow")
	r.masters("the grow", 5) // the joiners as masters with slots
	r.step("shrink to 6", "resize", r.name, "redis=6", "--wait")
	r.everyKey("the shrink")
	for _, gone := range []string{r.name + "-redis-6", r.name + "-redis-7"} {
		if exists(filepath.Join(r.app.folder(), gone)) {
			t.Errorf("%s is still there after the shrink", gone)
		}
	}
	if out := r.redis("", "cluster", "nodes"); strings.Count(out, "\n") != 6 {
		t.Errorf("after the shrink the cluster knows %d nodes, want 6:\n%s", strings.Count(out, "\n"), out)
	}
	r.deleteLeavingNoRedis()
}

// TestRedisReplacesAKilledMasterAndRetriesAFailedServer: a master whose redis is killed is
// replaced (its replica took over; the successor becomes that one's replica, and the dead
// node is forgotten), a server that fails its configure is set up by a retry once the cause
// is gone, and a delete leaves no redis running.
func TestRedisReplacesAKilledMasterAndRetriesAFailedServer(t *testing.T) {
	t.Parallel()
	guard(t)
	r := deployRedis(t, "redisr")
	n := r.name

	victim := ""
	servers := statusJSON(t, n)
	for _, line := range strings.Split(r.redis("", "cluster", "nodes"), "\n") {
		if f := strings.Fields(line); len(f) > 2 && strings.Contains(f[2], "master") {
			for _, m := range servers.Role("redis").Members {
				if strings.HasPrefix(f[1], fmt.Sprintf("127.0.0.1:%d@", m.Ports["client"])) {
					victim = m.Name
				}
			}
			break
		}
	}
	if victim == "" {
		t.Fatal("found no master to kill")
	}
	if err := syscallKill(r.app.pidOf(victim)); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	if res := cli(t, "signal", n, victim, "gone"); res.Code != 0 {
		t.Fatalf("signal: %s", res)
	}
	waitUpTo(t, 2*time.Minute, "the killed server replaced", func() bool {
		s := statusJSON(t, n)
		return s.Phase == workflows.PhaseReady && s.Role("redis").Ready == 6 && s.Member(victim) == nil
	})
	t.Logf("redis replace a killed master: %.1f s", time.Since(start).Seconds())
	r.app.notePIDs()
	r.port = r.readyPort()
	r.everyKey("the replacement")
	if out := r.redis("", "cluster", "nodes"); strings.Count(out, "\n") != 6 || strings.Contains(out, "fail") {
		t.Errorf("after the replacement the cluster should know its 6 live nodes alone:\n%s\nthe admin's delnodes:\n%s", out, cli(t, "logs", n, n+"-admin-0", "--event", "delnodes"))
	}

	r.app.failConfigures(true)
	if res := cli(t, "resize", n, "redis=7", "--wait"); res.Code != 1 {
		t.Fatalf("a grow whose new server fails should fail: %s", res)
	}
	r.app.failConfigures(false)
	r.step("retry", "retry", n, "--wait")
	r.everyKey("the retry")
	r.deleteLeavingNoRedis()
}

// redisCluster is a Redis Cluster deployed from examples/redis, with redisKeys keys written.
type redisCluster struct {
	t    *testing.T
	name string
	app  *realApp
	// port is the client port of the ready server the test talks to, chosen again after
	// each step, since a step may remove the one it talked to before.
	port string
}

const redisKeys = 200

// deployRedis deploys the example as name and writes the keys.
func deployRedis(t *testing.T, name string) *redisCluster {
	r := &redisCluster{t: t, name: name, app: newRealApp(t, "redis", "redis.sh", name, "redis", "redis.pid", "redis-server", "redis-cli", "jq")}
	r.step("deploy 6", "deploy", "-f", r.app.specPath, "--wait")
	var sets strings.Builder
	for i := range redisKeys {
		fmt.Fprintf(&sets, "SET key-%d value-%d\n", i, i)
	}
	r.redis(sets.String())
	r.everyKey("the deploy")
	return r
}

// step runs a CLI command that must succeed, and logs how long it took.
func (r *redisCluster) step(name string, args ...string) {
	r.t.Helper()
	start := time.Now()
	if res := cli(r.t, args...); res.Code != 0 {
		r.app.notePIDs()
		r.t.Fatalf("%s: %s", name, res)
	}
	r.t.Logf("redis %s: %.1f s", name, time.Since(start).Seconds())
	r.app.notePIDs()
	if args[0] != "delete" {
		r.port = r.readyPort()
	}
}

// readyPort is a ready server's client port, from the port clusterflow gave it.
func (r *redisCluster) readyPort() string {
	r.t.Helper()
	s := statusJSON(r.t, r.name)
	for _, m := range s.Role("redis").Members {
		if m.State == workflows.MemberReady && m.Ports["client"] != 0 {
			return strconv.Itoa(m.Ports["client"])
		}
	}
	r.t.Fatalf("no ready server with a client port: %v", memberStates(s, "redis"))
	return ""
}

// redis runs redis-cli in cluster mode against r.port, with input as its commands.
func (r *redisCluster) redis(input string, args ...string) string {
	r.t.Helper()
	cmd := exec.Command("redis-cli", append([]string{"-c", "-h", "127.0.0.1", "-p", r.port}, args...)...)
	cmd.Stdin = strings.NewReader(input)
	out, err := cmd.CombinedOutput()
	if err != nil {
		r.t.Fatalf("redis-cli %v: %v\n%s", args, err, out)
	}
	return string(out)
}

// everyKey fails the test unless every key reads back its value.
func (r *redisCluster) everyKey(after string) {
	r.t.Helper()
	var gets strings.Builder
	for i := range redisKeys {
		fmt.Fprintf(&gets, "GET key-%d\n", i)
	}
	// With -c, redis-cli follows each key's redirect and says so on a line of its own.
	var got []string
	for _, line := range strings.Split(strings.TrimSpace(r.redis(gets.String())), "\n") {
		if !strings.HasPrefix(line, "-> Redirected") {
			got = append(got, strings.TrimSpace(line))
		}
	}
	kept := 0
	for i, v := range got {
		if i < redisKeys && v == fmt.Sprintf("value-%d", i) {
			kept++
		}
	}
	if kept != redisKeys {
		r.t.Fatalf("after %s, %d of %d keys read back (%d answers, first %q)", after, kept, redisKeys, len(got), got[:min(len(got), 8)])
	}
}

// masters waits for the live masters the nodes' gossip agrees on to be want.
func (r *redisCluster) masters(after string, want int) {
	r.t.Helper()
	waitUpTo(r.t, time.Minute, fmt.Sprintf("%d masters after %s", want, after), func() bool {
		got := 0
		for _, line := range strings.Split(r.redis("", "cluster", "nodes"), "\n") {
			if f := strings.Fields(line); len(f) > 2 && strings.Contains(f[2], "master") && !strings.Contains(f[2], "fail") {
				got++
			}
		}
		return got == want
	})
}

// deleteLeavingNoRedis deletes the cluster and fails the test for each redis that outlived it.
func (r *redisCluster) deleteLeavingNoRedis() {
	r.t.Helper()
	r.step("delete", "delete", r.name, "--wait")
	r.app.noneOutlived()
}
