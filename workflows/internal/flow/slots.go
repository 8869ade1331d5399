package flow

import "go.temporal.io/sdk/workflow"

// Slots bounds what runs at once in workflow code: members' scripts, a wide role's
// batches, the bytes of cluster files in flight to hosts. It is the one mechanism of every
// bounded-parallel loop; each loop takes a slot before it starts something and gives it
// back when that ends. A limit of 0 or less bounds nothing.
type Slots struct {
	Limit, Used int
}

// Fits says whether n more may start now. Something alone always fits, however large, so
// that no loop waits forever for an item over the limit.
func (s *Slots) Fits(n int) bool {
	return s.Limit <= 0 || s.Used == 0 || s.Used+n <= s.Limit
}

// Wait blocks until n more fit, or stop says to stop waiting (nil: never).
func (s *Slots) Wait(ctx workflow.Context, n int, stop func() bool) error {
	return workflow.Await(ctx, func() bool { return s.Fits(n) || stop != nil && stop() })
}

// Take and Give count n started and n ended.
func (s *Slots) Take(n int) { s.Used += n }
func (s *Slots) Give(n int) { s.Used -= n }
