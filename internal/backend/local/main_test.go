package local

import "testing"

// claimsOfTheirOwn gives a test a folder of script user claims of its own, not the
// machine's: what earlier runs (or the e2e suite beside them) claimed, within the minute
// a claim stays fresh, must not change which numbers it gets.
func claimsOfTheirOwn(t *testing.T) {
	saved := uidClaimsDir
	uidClaimsDir = t.TempDir()
	t.Cleanup(func() { uidClaimsDir = saved })
}
