package local

import (
	"os"
	"testing"
)

// TestMain keeps the tests' script users' records out of the machine's /run/userdb.
func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "userdb-")
	if err != nil {
		panic(err)
	}
	userdbDir = dir
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// claimsOfTheirOwn gives a test a folder of script user claims of its own, not the
// machine's: what earlier runs (or the e2e suite beside them) claimed, within the minute
// a claim stays fresh, must not change which numbers it gets.
func claimsOfTheirOwn(t *testing.T) {
	saved := uidClaimsDir
	uidClaimsDir = t.TempDir()
	t.Cleanup(func() { uidClaimsDir = saved })
}
