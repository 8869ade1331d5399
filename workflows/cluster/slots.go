package cluster

import "go.temporal.io/sdk/workflow"

// slots bounds what runs at once in workflow code: members' scripts, a wide role's
// batches, the bytes of cluster files in flight to hosts. It is the one mechanism of every
// bounded-parallel loop; each loop takes a slot before it starts something and gives it
// back when that ends. A limit of 0 or less bounds nothing.
type slots struct {
	limit, used int
}

// fits says whether n more may start now. Something alone always fits, however large, so
// that no loop waits forever for an item over the limit.
func (s *slots) fits(n int) bool {
	return s.limit <= 0 || s.used == 0 || s.used+n <= s.limit
}

// wait blocks until n more fit, or stop says to stop waiting (nil: never).
func (s *slots) wait(ctx workflow.Context, n int, stop func() bool) error {
	return workflow.Await(ctx, func() bool { return s.fits(n) || stop != nil && stop() })
}

func (s *slots) take(n int) { s.used += n }
func (s *slots) give(n int) { s.used -= n }
