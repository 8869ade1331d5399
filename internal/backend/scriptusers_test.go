package backend

import (
	"strings"
	"testing"
)

// Each cluster gets the lowest free user of the range and keeps it, across a new backend
// on the same folder too; a removed cluster frees its user; a full range says so.
func TestClustersGetUsersOfTheirOwnFromTheRange(t *testing.T) {
	root := t.TempDir()
	l, err := NewLocal(root)
	if err != nil {
		t.Fatal(err)
	}
	if err := l.UseScriptUIDs(61000, 61001); err != nil {
		t.Fatal(err)
	}
	uid := func(l *Local, cluster string) uint32 {
		t.Helper()
		u, err := l.userOf(cluster)
		if err != nil {
			t.Fatal(err)
		}
		if u.GID != u.UID {
			t.Errorf("cluster %s: group %d, want its user's number %d", cluster, u.GID, u.UID)
		}
		return u.UID
	}
	if a, b := uid(l, "a"), uid(l, "b"); a != 61000 || b != 61001 {
		t.Errorf("a=%d b=%d, want 61000 and 61001", a, b)
	}
	if _, err := l.userOf("c"); err == nil || !strings.Contains(err.Error(), "all 2 of --script-uids 61000-61001 are taken") {
		t.Errorf("a full range: %v", err)
	}
	again, _ := NewLocal(root)
	_ = again.UseScriptUIDs(61000, 61001)
	if b := uid(again, "b"); b != 61001 {
		t.Errorf("after a restart b has %d, want 61001", b)
	}
	if err := l.ScriptUIDs.release("a"); err != nil {
		t.Fatal(err)
	}
	if c := uid(l, "c"); c != 61000 {
		t.Errorf("c got %d, want a's freed 61000", c)
	}
	if err := (&Local{}).UseScriptUIDs(0, 10); err == nil {
		t.Error("a range from 0 (root) was taken")
	}
}
