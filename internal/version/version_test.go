package version

import "testing"

func TestShortKeepsTheDirtyMark(t *testing.T) {
	for commit, want := range map[string]string{
		"1a2b3c4d5e6f7a8b9c0d1a2b3c4d5e6f7a8b9c0d":       "1a2b3c4d5e6f",
		"1a2b3c4d5e6f7a8b9c0d1a2b3c4d5e6f7a8b9c0d-dirty": "1a2b3c4d5e6f-dirty",
		"1a2b": "1a2b",
	} {
		if got := Short(commit); got != want {
			t.Errorf("Short(%q) = %q, want %q", commit, got, want)
		}
	}
	if got := (Info{Release: "0.1.0"}).String(); got != "0.1.0" {
		t.Errorf("a version without a commit reads %q", got)
	}
	if got := (Info{Release: "0.1.0", Commit: "1a2b3c4d5e6f7a8b-dirty"}).String(); got != "0.1.0 (commit 1a2b3c4d5e6f-dirty)" {
		t.Errorf("a version with a commit reads %q", got)
	}
}
