//go:build race

package workflows_test

// raceDetector says the tests run under the race detector, which makes the SDK's test
// environment about ten times slower: the largest tests run in a step of their own without
// it (make unit).
const raceDetector = true
