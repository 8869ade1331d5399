//go:build race

package workflows_test

import "testing"

// withoutRace skips a test too slow under the race detector (which makes the SDK's test
// environment about ten times slower) for what the detector adds there: `make unit` runs
// it without the detector (the Makefile's WITHOUT_RACE, which
// TestTheMakefileRunsEveryTestSkippedUnderRace keeps in step). The same code runs under
// the detector in the smaller tests.
func withoutRace(t *testing.T) {
	t.Helper()
	t.Skip("too slow under the race detector: `make unit` runs it in a step of its own without it")
}
