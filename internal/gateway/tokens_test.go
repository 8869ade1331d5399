package gateway

import (
	"strings"
	"testing"
)

func TestTokenLinesWithAndWithoutClusters(t *testing.T) {
	secret, line, err := NewToken("pager", []Scope{ScopeEvents}, []string{"team-a-*", "shared"})
	if err != nil {
		t.Fatal(err)
	}
	_, other, err := NewToken("other", []Scope{ScopeRead}, AllClusters)
	if err != nil {
		t.Fatal(err)
	}
	hash := other[strings.LastIndex(other, " ")+1:]
	tokens, err := ParseTokens(strings.NewReader(line + "\nold events,read " + hash + "\n"))
	if err != nil {
		t.Fatal(err)
	}
	scoped, ok := tokens.Match(secret)
	if !ok || scoped.Name != "pager" {
		t.Fatalf("the new line's token: %+v %v", scoped, ok)
	}
	for cluster, want := range map[string]bool{"team-a-1": true, "shared": true, "team-b-1": false, "team-a": false, "shared-2": false} {
		if got := scoped.AllowsCluster(cluster); got != want {
			t.Errorf("pager on %s: %v, want %v", cluster, got, want)
		}
	}
	if scoped.Allows(ScopeReplace) || !scoped.Allows(ScopeEvents) {
		t.Errorf("pager's scopes: %v", scoped.Scopes)
	}
	// A line written before clusters existed is for every cluster.
	if old := tokens[1]; !old.AllowsCluster("anything") || old.Line() != "old events,read * "+hash {
		t.Errorf("a three-field line: %+v, written back as %q", old, old.Line())
	}
	for _, bad := range []string{"x events team-[ " + hash, "x events,write * " + hash, "x events * * " + hash} {
		if _, err := ParseTokens(strings.NewReader(bad)); err == nil {
			t.Errorf("%q was accepted", bad)
		}
	}
}
