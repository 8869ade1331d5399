//go:build !race

package workflows_test

import "testing"

func withoutRace(*testing.T) {}
