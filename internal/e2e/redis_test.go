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

// TestRedisLivesThroughTheLifecycle runs the Redis Cluster example (examples/redis) through
// the real CLI: deploy six servers and the admin that makes them a cluster, write keys,
// grow to eight (the admin adds the joiners as masters and moves slots to them), a graceful
// shrink to six (the admin moves the leavers' slots off in removing, while they still run),
// a server whose redis is killed replaced (its replica took over; the successor becomes
// that one's replica, and the dead node is forgotten), a failed server retried, and a
// delete that leaves no redis running. Every key is there after each step.
func TestRedisLivesThroughTheLifecycle(t *testing.T) {
	t.Parallel()
	guard(t)
	n := "redisc"
	app := newRealApp(t, "redis", "redis.sh", n, "redis", "redis.pid", "redis-server", "redis-cli", "jq")
	// port is a ready server's client port, from the port clusterflow gave it.
	readyPort := func() string {
		s := statusJSON(t, n)
		for _, m := range s.Role("redis").Members {
			if m.State == workflows.MemberReady && m.Ports["client"] != 0 {
				return strconv.Itoa(m.Ports["client"])
			}
		}
		t.Fatalf("no ready server with a client port: %v", memberStates(s, "redis"))
		return ""
	}
	port := "" // the server the test talks to, chosen again after each step
	redis := func(input string, args ...string) string {
		t.Helper()
		cmd := exec.Command("redis-cli", append([]string{"-c", "-h", "127.0.0.1", "-p", port}, args...)...)
		cmd.Stdin = strings.NewReader(input)
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("redis-cli %v: %v\n%s", args, err, out)
		}
		return string(out)
	}
	const keys = 200
	var sets, gets strings.Builder
	for i := range keys {
		fmt.Fprintf(&sets, "SET key-%d value-%d\n", i, i)
		fmt.Fprintf(&gets, "GET key-%d\n", i)
	}
	everyKey := func(after string) {
		t.Helper()
		// With -c, redis-cli follows each key's redirect and says so on a line of its own.
		var got []string
		for _, line := range strings.Split(strings.TrimSpace(redis(gets.String())), "\n") {
			if !strings.HasPrefix(line, "-> Redirected") {
				got = append(got, strings.TrimSpace(line))
			}
		}
		kept := 0
		for i, v := range got {
			if i < keys && v == fmt.Sprintf("value-%d", i) {
				kept++
			}
		}
		if kept != keys {
			t.Fatalf("after %s, %d of %d keys read back (%d answers, first %q)", after, kept, keys, len(got), got[:min(len(got), 8)])
		}
	}
	// masters waits for the live masters the nodes' gossip agrees on to be want.
	masters := func(after string, want int) {
		t.Helper()
		got := 0
		waitUpTo(t, time.Minute, fmt.Sprintf("%d masters after %s", want, after), func() bool {
			got = 0
			for _, line := range strings.Split(redis("", "cluster", "nodes"), "\n") {
				if f := strings.Fields(line); len(f) > 2 && strings.Contains(f[2], "master") && !strings.Contains(f[2], "fail") {
					got++
				}
			}
			return got == want
		})
	}
	times := map[string]time.Duration{}
	step := func(name string, args ...string) {
		t.Helper()
		start := time.Now()
		if res := cli(t, args...); res.Code != 0 {
			app.notePIDs()
			t.Fatalf("%s: %s", name, res)
		}
		times[name] = time.Since(start)
		app.notePIDs()
		if args[0] != "delete" {
			port = readyPort()
		}
	}

	step("deploy 6", "deploy", "-f", app.specPath, "--wait")
	redis(sets.String())
	everyKey("the deploy")
	masters("the deploy", 3) // each with a replica
	step("grow to 8", "resize", n, "redis=8", "--wait")
	everyKey("the grow")
	masters("the grow", 5) // the joiners as masters with slots
	step("shrink to 6", "resize", n, "redis=6", "--wait")
	everyKey("the shrink")
	for _, gone := range []string{n + "-redis-6", n + "-redis-7"} {
		if exists(filepath.Join(app.folder(), gone)) {
			t.Errorf("%s is still there after the shrink", gone)
		}
	}
	if out := redis("", "cluster", "nodes"); strings.Count(out, "\n") != 6 {
		t.Errorf("after the shrink the cluster knows %d nodes, want 6:\n%s", strings.Count(out, "\n"), out)
	}

	// A master's redis dies: its replica takes over, the member is reported gone, and its
	// successor becomes the new master's replica.
	victim := ""
	servers := statusJSON(t, n)
	for _, line := range strings.Split(redis("", "cluster", "nodes"), "\n") {
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
	if err := syscallKill(app.pidOf(victim)); err != nil {
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
	times["replace a killed master"] = time.Since(start)
	app.notePIDs()
	port = readyPort()
	everyKey("the replacement")
	if out := redis("", "cluster", "nodes"); strings.Count(out, "\n") != 6 || strings.Contains(out, "fail") {
		t.Errorf("after the replacement the cluster should know its 6 live nodes alone:\n%s\nthe admin's delnodes:\n%s", out, cli(t, "logs", n, n+"-admin-0", "--event", "delnodes"))
	}

	// A new server fails its configure; once the cause is gone, retry sets it up.
	app.failConfigures(true)
	if res := cli(t, "resize", n, "redis=7", "--wait"); res.Code != 1 {
		t.Fatalf("a grow whose new server fails should fail: %s", res)
	}
	app.failConfigures(false)
	step("retry", "retry", n, "--wait")
	everyKey("the retry")

	step("delete", "delete", n, "--wait")
	app.noneOutlived()
	// bench/redis.sh reports this line.
	var report []string
	for _, name := range []string{"deploy 6", "grow to 8", "shrink to 6", "replace a killed master", "retry", "delete"} {
		report = append(report, fmt.Sprintf("%s %.1fs", name, times[name].Seconds()))
	}
	t.Logf("redis step times: %s", strings.Join(report, ", "))
}
