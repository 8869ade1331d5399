package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/clusterflow/clusterflow/internal/signing"
	"github.com/clusterflow/clusterflow/spec"
	"github.com/clusterflow/clusterflow/starter"
	"github.com/clusterflow/clusterflow/workflows"
)

// A host started with --trusted-keys runs only the scripts of specs signed by a key it
// trusts, as BOSH's agents run only what the director signed. An unsigned deploy and one
// signed by an unknown key run nothing, and their members say why; a signed deploy and a
// signed resize run, and status says who signed each generation. Changes sent with an old
// signature (as a raw SDK call or the Web UI would send them) are refused on the host: a
// role the signed spec does not have, an apply with one env value changed, and a deploy
// whose env is not the one signed.
func TestHostsRunOnlySpecsSignedByKeysTheyTrust(t *testing.T) {
	t.Parallel()
	guard(t)
	s := newServerStack(t)
	dir := t.TempDir()
	lines := map[string]string{}
	for _, name := range []string{"ops", "mallory"} {
		res := s.cli("keys", "new", name, "--out", filepath.Join(dir, name+".key"))
		if res.Code != 0 || !strings.HasPrefix(res.Stdout, name+" ed25519 ") {
			t.Fatalf("keys new %s: %s", name, res)
		}
		lines[name] = strings.TrimSpace(res.Stdout)
		if info, err := os.Stat(filepath.Join(dir, name+".key")); err != nil || info.Mode().Perm() != 0o600 {
			t.Errorf("the private key of %s: %v, %v; want mode 0600", name, info, err)
		}
	}
	if res := s.cli("keys", "new", "ops", "--out", filepath.Join(dir, "ops.key")); res.Code == 0 || !strings.Contains(res.Stderr, "never overwritten") {
		t.Errorf("a second key over the first: %s", res)
	}
	trusted := filepath.Join(dir, "trusted-keys")
	if err := os.WriteFile(trusted, []byte(lines["ops"]+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	worker := s.start("worker", 1, "Worker starting", "worker", "--data", s.data, "--trusted-keys", trusted)

	ran := filepath.Join(dir, "ran.log")
	script := filepath.Join(dir, "app.sh")
	if err := os.WriteFile(script, []byte("#!/bin/sh\necho \"$CLUSTERFLOW_MEMBER $CLUSTERFLOW_EVENT setting=$SETTING\" >> "+ran+"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	specFile := func(name, setting string, members int) string {
		p := filepath.Join(dir, name+"-"+setting+".yaml")
		// spare has no member until a test gives it one.
		body := "name: " + name + "\nroles:\n  - {name: w, members: " + string(rune('0'+members)) + ", startscript: " + script + ", env: {SETTING: " + setting + "}}\n" +
			"  - {name: spare, members: 0, startscript: " + script + ", env: {SETTING: " + setting + "}}\n"
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	detailOf := func(cluster, member string) string {
		st := s.status(cluster)
		for _, m := range st.Role("w").Members {
			if m.Name == member {
				return string(m.State) + ": " + m.Detail
			}
		}
		return ""
	}

	if res := s.cli("deploy", "-f", specFile("plain", "a", 1), "--wait"); res.Code == 0 {
		t.Errorf("an unsigned deploy succeeded: %s", res)
	}
	if got := detailOf("plain", "plain-w-0"); !strings.Contains(got, "config_error") || !strings.Contains(got, "unsigned spec") {
		t.Errorf("the unsigned member: %q", got)
	}
	if res := s.cli("deploy", "-f", specFile("rogue", "a", 1), "--sign-key", filepath.Join(dir, "mallory.key"), "--wait"); res.Code == 0 {
		t.Errorf("a deploy signed by an unknown key succeeded: %s", res)
	}
	if got := detailOf("rogue", "rogue-w-0"); !strings.Contains(got, `signature by unknown key "mallory"`) {
		t.Errorf("the member signed by an unknown key: %q", got)
	}

	if res := s.cli("deploy", "-f", specFile("signed", "a", 1), "--sign-key", filepath.Join(dir, "ops.key"), "--wait"); res.Code != 0 {
		t.Fatalf("a signed deploy: %s", res)
	}
	if res := s.cli("resize", "signed", "w=2", "--sign-key", filepath.Join(dir, "ops.key"), "--wait"); res.Code != 0 {
		t.Fatalf("a signed resize: %s", res)
	}
	st := s.status("signed")
	if want := []workflows.GenerationSignature{{Generation: 2, Key: "ops"}, {Generation: 1, Key: "ops"}}; !slices.Equal(st.Signatures, want) {
		t.Errorf("signatures in status: %+v, want %+v", st.Signatures, want)
	}
	if table := s.cli("status", "signed"); !strings.Contains(table.Stdout, "Signed:   generation 2 by ops, generation 1 by ops") {
		t.Errorf("status does not say who signed:\n%s", table.Stdout)
	}

	// What a namespace writer could send with the Web UI or a raw SDK call, keeping the
	// signature of generation 2: an apply changing a role's env, an apply adding a role,
	// and a deploy whose env differs from the one signed.
	key, err := signing.LoadPrivateKey(filepath.Join(dir, "ops.key"))
	if err != nil {
		t.Fatal(err)
	}
	signedSpec, err := spec.Load(specFile("signed", "a", 2))
	if err != nil {
		t.Fatal(err)
	}
	oldSignature := key.Sign(signing.ManifestOf(signedSpec, "default"))
	tc := s.dial()
	defer tc.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	raw := starter.New(tc, "")
	changed, err := spec.Load(specFile("signed", "b", 2))
	if err != nil {
		t.Fatal(err)
	}
	changed.Signature = oldSignature
	if _, err := raw.Apply(ctx, changed); err != nil {
		t.Fatal(err)
	}
	// The new env's rollout sets up a replacement, which the host refuses: the rollout
	// pauses, and the member it was to replace stays, running what was signed.
	waitFor(t, "the host to refuse the unsigned env's rollout", func() bool {
		st := s.status("signed")
		return st.Phase == workflows.PhaseRolloutPaused && strings.Contains(st.Rollout.Paused, `signature by key "ops" does not match the spec it came with`)
	})
	if st := s.status("signed"); st.Role("w").Ready != 2 {
		t.Errorf("the members running the signed spec did not stay: %v", memberStates(st, "w"))
	}
	grown := signedSpec
	extra := grown.Roles[0]
	extra.Name = "x"
	grown.Roles = append(slices.Clone(grown.Roles), extra)
	grown.Signature = oldSignature
	if _, err := raw.Apply(ctx, grown); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the host to refuse the unsigned role", func() bool {
		st := s.status("signed")
		members := st.Role("x").Members
		return len(members) > 0 && strings.Contains(members[0].Detail, `signature by key "ops" does not match the spec it came with (changed after it was signed); and before it, the spec key "ops" signed has no role "x"`)
	})
	// An env value changed by an apply (allowed for a role without members) and a member
	// for that role, with the old signature: the new member's configure is refused.
	respared := signedSpec
	respared.Signature = oldSignature
	respared.Roles = slices.Clone(signedSpec.Roles)
	respared.Roles[1].Env = map[string]string{"SETTING": "b"}
	respared.Roles[1].Members = 1
	if _, err := raw.Apply(ctx, respared); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the host to refuse the changed env", func() bool {
		st := s.status("signed")
		members := st.Role("spare").Members
		return len(members) > 0 && strings.Contains(members[0].Detail, `role spare's env is not the one key "ops" signed`)
	})
	forged, err := spec.Load(specFile("forged", "b", 1))
	if err != nil {
		t.Fatal(err)
	}
	forged.Signature = key.Sign(signing.ManifestOf(func() spec.Cluster { c, _ := spec.Load(specFile("forged", "a", 1)); return c }(), "default"))
	if err := raw.Deploy(ctx, forged, starter.DeployOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the host to refuse the tampered spec", func() bool {
		return strings.Contains(detailOf("forged", "forged-w-0"), `signature by key "ops" does not match the spec it came with`)
	})

	log, _ := os.ReadFile(ran)
	got := strings.Split(strings.TrimSpace(string(log)), "\n")
	for _, line := range got {
		if !strings.HasPrefix(line, "signed-") || !strings.HasSuffix(line, "setting=a") {
			t.Errorf("ran what no trusted key signed: %q", line)
		}
	}
	if !slices.Contains(got, "signed-w-0 configure setting=a") || !slices.Contains(got, "signed-w-1 configure setting=a") {
		t.Errorf("the signed members did not run:\n%s", log)
	}
	// Teardowns are checked too: once the host trusts only another key, deleting the signed
	// cluster runs none of its teardowns (its folder still goes).
	if err := os.WriteFile(trusted, []byte(lines["mallory"]+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	s.kill(worker)
	s.start("worker", 2, "Worker starting", "worker", "--data", s.data, "--trusted-keys", trusted)
	for _, n := range []string{"plain", "rogue", "signed", "forged"} {
		s.cli("delete", n, "--wait")
	}
	if log, _ := os.ReadFile(ran); strings.Contains(string(log), "teardown") {
		t.Errorf("a teardown ran that no trusted key covers:\n%s", log)
	}
	if st := s.status("signed"); st.Phase != workflows.PhaseDeleted {
		t.Errorf("the signed cluster after its delete: %s (%s)", st.Phase, st.Message)
	}
}

// A signature binds the generation it was made for, the namespace by its ID, the member
// counts and each action's parameter schema: an unsigned resize sets up no member on a host
// that trusts keys (a signed one does, and a retry then sets up what it refused), an old
// signature replayed to go back to its spec is refused before anything changes, an unsigned
// return to an older signed script sets up nothing, a spec signed for a namespace of the
// same name elsewhere runs nothing, and an action's parameters must fit its schema.
func TestSignaturesBindGenerationNamespaceCountsAndParameters(t *testing.T) {
	t.Parallel()
	guard(t)
	s, dir := trustingStack(t)
	ops := filepath.Join(dir, "ops.key")
	ran := filepath.Join(dir, "ran.log")
	specFile := func(version string, members int) string {
		script := filepath.Join(dir, "app-"+version+".sh")
		if err := os.WriteFile(script, []byte("#!/bin/sh\necho \"$CLUSTERFLOW_MEMBER $CLUSTERFLOW_EVENT "+version+" $*\" >> "+ran+"\n"), 0o755); err != nil {
			t.Fatal(err)
		}
		p := filepath.Join(dir, "c-"+version+".yaml")
		body := fmt.Sprintf("name: bound\nroles:\n  - {name: w, members: %d, startscript: %s, events: [configure, addnodes, delnodes, teardown, upgrade], actions: [restore], actionParams: {restore: {snapshot: '[a-z0-9-]{1,32}'}}}\n", members, script)
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	member := func(name string) workflows.MemberStatus {
		st := s.status("bound")
		for _, m := range st.Role("w").Members {
			if m.Name == name {
				return m
			}
		}
		return workflows.MemberStatus{}
	}
	if res := s.cli("deploy", "-f", specFile("v1", 1), "--sign-key", ops, "--wait"); res.Code != 0 {
		t.Fatalf("a signed deploy: %s", res)
	}
	// Counts: an unsigned resize sets up no member.
	if res := s.cli("resize", "bound", "w=2", "--wait"); res.Code == 0 {
		t.Errorf("an unsigned resize set a member up: %s", res)
	}
	if m := member("bound-w-1"); m.State != workflows.MemberConfigError || !strings.Contains(m.Detail, "unsigned spec (generation 2)") {
		t.Errorf("the member an unsigned resize asked for: %s %q", m.State, m.Detail)
	}
	if res := s.cli("resize", "bound", "w=3", "--sign-key", ops, "--wait"); res.Code == 0 {
		t.Errorf("the signed resize should leave the refused member failed: %s", res)
	}
	if res := s.cli("retry", "bound", "--wait"); res.Code != 0 {
		t.Fatalf("retry under the signed generation: %s", res)
	}
	if st := s.status("bound"); st.Phase != workflows.PhaseReady || st.Role("w").Ready != 3 {
		t.Fatalf("after the signed resize and the retry: %s, %d ready", st.Phase, st.Role("w").Ready)
	}
	// A new script, signed; then the first spec again, with its own old signature, and
	// unsigned.
	if res := s.cli("apply", "-f", specFile("v2", 3), "--sign-key", ops, "--wait"); res.Code != 0 {
		t.Fatalf("a signed apply of a new script: %s", res)
	}
	// Parameters: those the schema names, with values it allows; refused before anything
	// runs otherwise.
	if res := s.cli("run", "bound", "restore", "--members", "bound-w-0", "--param", "snapshot=nightly-1", "--wait"); res.Code != 0 {
		t.Errorf("an action with a parameter its schema allows: %s", res)
	}
	for _, bad := range []string{"snapshot=../../etc", "target=x"} {
		if res := s.cli("run", "bound", "restore", "--members", "bound-w-0", "--param", bad); res.Code == 0 {
			t.Errorf("an action with %s ran: %s", bad, res)
		}
	}
	first, err := spec.Load(specFile("v1", 3))
	if err != nil {
		t.Fatal(err)
	}
	key, err := signing.LoadPrivateKey(ops)
	if err != nil {
		t.Fatal(err)
	}
	tc := s.dial()
	defer tc.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	raw := starter.New(tc, "")
	replayed := first
	replayed.Signature = &spec.Signature{NamespaceID: s.namespaceID(), Generation: 2}
	replayed.Signature = key.Sign(signing.ManifestOf(replayed, "default"))
	if _, err := raw.Apply(ctx, replayed); err == nil || !strings.Contains(err.Error(), "it is signed for generation 2 of cluster bound") {
		t.Errorf("an old signature replayed: %v; want it refused, naming its generation", err)
	}
	back := first
	back.Signature = nil
	if _, err := raw.Apply(ctx, back); err != nil {
		t.Fatal(err)
	}
	refusedBack := func(st workflows.ClusterStatus) bool {
		return st.Phase == workflows.PhaseRolloutPaused && st.Rollout != nil && strings.Contains(st.Rollout.Paused, "unsigned spec (generation ")
	}
	for deadline := time.Now().Add(time.Minute); !refusedBack(s.status("bound")); time.Sleep(200 * time.Millisecond) {
		if time.Now().After(deadline) {
			st := s.status("bound")
			t.Fatalf("the host did not refuse going back to the older script: %s %q, rollout %+v, members %v", st.Phase, st.Message, st.Rollout, memberStates(st, "w"))
		}
	}
	// A namespace of the same name elsewhere: its ID is not this one's.
	elsewhere, err := spec.Load(specFile("v1", 1))
	if err != nil {
		t.Fatal(err)
	}
	elsewhere.Name = "abroad"
	elsewhere.Signature = &spec.Signature{NamespaceID: "00000000-0000-0000-0000-000000000000", Generation: 1}
	elsewhere.Signature = key.Sign(signing.ManifestOf(elsewhere, "default"))
	if err := raw.Deploy(ctx, elsewhere, starter.DeployOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the host to refuse a spec signed for another namespace's ID", func() bool {
		st := s.status("abroad")
		for _, m := range st.Role("w").Members {
			if strings.Contains(m.Detail, "namespace of ID 00000000-0000-0000-0000-000000000000, not this one's") {
				return true
			}
		}
		return false
	})
	log, _ := os.ReadFile(ran)
	if n := strings.Count(string(log), "bound-w-1 configure "); n != 1 {
		t.Errorf("bound-w-1 configured %d times; want once, by the retry under the signed generation:\n%s", n, log)
	}
	for _, line := range strings.Split(strings.TrimSpace(string(log)), "\n") {
		if f := strings.Fields(line); len(f) >= 3 && (f[0] == "abroad-w-0" || (f[1] == "upgrade" && f[2] == "v1") || (f[1] == "configure" && f[2] == "v1" && slices.Contains([]string{"bound-w-3", "bound-w-4", "bound-w-5"}, f[0]))) {
			t.Errorf("ran what the host should have refused: %q", line)
		}
	}
	if !strings.Contains(string(log), "bound-w-0 restore v2 --action restore --param snapshot=nightly-1") {
		t.Errorf("the action with an allowed parameter did not run:\n%s", log)
	}
}

// A host keeps, past a cluster's deletion, the newest signing time of the specs it took of
// the cluster's name: a namespace writer without the key who deletes the cluster and
// deploys its older signed spec again sets nothing up there; a spec signed afresh does.
func TestAnOlderSignedSpecDoesNotComeBackUnderANewDeploy(t *testing.T) {
	t.Parallel()
	guard(t)
	s, dir := trustingStack(t)
	key, err := signing.LoadPrivateKey(filepath.Join(dir, "ops.key"))
	if err != nil {
		t.Fatal(err)
	}
	script := filepath.Join(dir, "app.sh")
	if err := os.WriteFile(script, []byte("#!/bin/sh\ntrue\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	specPath := filepath.Join(dir, "again.yaml")
	if err := os.WriteFile(specPath, []byte("name: again\nroles:\n  - {name: w, members: 1, startscript: "+script+"}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	c := s.dial()
	defer c.Close()
	st := starter.New(c, "")
	signedAt := func(at time.Time) spec.Cluster {
		t.Helper()
		cluster, err := spec.Load(specPath)
		if err != nil {
			t.Fatal(err)
		}
		cluster.Signature = &spec.Signature{NamespaceID: s.namespaceID(), Generation: 1, Runtime: true, SignedAt: at.UTC().Truncate(time.Second)}
		cluster.Signature = key.Sign(signing.ManifestOf(cluster, "default"))
		return cluster
	}
	deploy := func(cluster spec.Cluster) workflows.ClusterStatus {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if err := st.Deploy(ctx, cluster, starter.DeployOptions{}); err != nil {
			t.Fatalf("deploy: %v", err)
		}
		return s.waitForStatus("again", "settled", func(st workflows.ClusterStatus) bool { return st.Settled(1) })
	}
	now := time.Now()
	old := signedAt(now.Add(-time.Hour))
	if got := deploy(signedAt(now)); got.Phase != workflows.PhaseReady {
		t.Fatalf("the spec signed now: %s (%s)", got.Phase, got.Message)
	}
	if res := s.cli("delete", "again", "--wait"); res.Code != 0 {
		t.Fatalf("delete: %s", res)
	}
	got := deploy(old)
	if m := got.Role("w").Member("again-w-0"); got.Phase == workflows.PhaseReady || !strings.Contains(m.Detail+got.Message, "an older signed spec does not come back") {
		t.Errorf("the spec signed an hour before, deployed again: %s (%s), member %q; want it refused", got.Phase, got.Message, m.Detail)
	}
	if res := s.cli("delete", "again", "--wait"); res.Code != 0 {
		t.Fatalf("delete: %s", res)
	}
	if got := deploy(signedAt(time.Now().Add(time.Second))); got.Phase != workflows.PhaseReady {
		t.Errorf("a spec signed afresh: %s (%s)", got.Phase, got.Message)
	}
	if res := s.cli("delete", "again", "--wait"); res.Code != 0 {
		t.Errorf("delete: %s", res)
	}
}

// trustingStack is a stack whose worker runs only specs signed by the key ops, whose private
// key is dir/ops.key.
func trustingStack(t *testing.T) (s *stack, dir string) {
	t.Helper()
	s = newServerStack(t)
	dir = t.TempDir()
	res := s.cli("keys", "new", "ops", "--out", filepath.Join(dir, "ops.key"))
	if res.Code != 0 {
		t.Fatalf("keys new: %s", res)
	}
	trusted := filepath.Join(dir, "trusted-keys")
	if err := os.WriteFile(trusted, []byte(res.Stdout), 0o644); err != nil {
		t.Fatal(err)
	}
	s.start("worker", 1, "Worker starting", "worker", "--data", s.data, "--trusted-keys", trusted)
	return s, dir
}
