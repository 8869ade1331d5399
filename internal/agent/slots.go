package agent

import (
	"context"
	"slices"
	"sync"
	"time"
)

// checkSlots are the host's check slots, shared fairly between the clusters that check
// members here: one cluster alone holds all but a quarter of them (at least one is always
// left), and while others want them, its even share; a slot freed goes to the longest
// waiter still under its share. So the checks of one cluster, however many and however
// slow (a hung check holds its slot until its timeout, at most spec.MaxProbeTimeout), never
// stop another cluster's: those find a slot left, at once.
type checkSlots struct {
	mu      sync.Mutex
	total   int
	held    map[string]int
	waiting []*slotWaiter
}

type slotWaiter struct {
	cluster string
	granted chan struct{}
}

func newCheckSlots(total int) *checkSlots {
	return &checkSlots{total: max(total, 1), held: map[string]int{}}
}

// acquire takes a slot for a check of the cluster (its key), waiting at most within; it
// returns the slot's release, or false when none came in time or ctx ended.
func (s *checkSlots) acquire(ctx context.Context, cluster string, within time.Duration) (release func(), ok bool) {
	release = func() { s.release(cluster) }
	s.mu.Lock()
	if len(s.waiting) == 0 && s.mayTake(cluster) {
		s.held[cluster]++
		s.mu.Unlock()
		return release, true
	}
	w := &slotWaiter{cluster: cluster, granted: make(chan struct{})}
	s.waiting = append(s.waiting, w)
	s.grant()
	s.mu.Unlock()
	timer := time.NewTimer(within)
	defer timer.Stop()
	select {
	case <-w.granted:
		return release, true
	case <-timer.C:
	case <-ctx.Done():
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	select {
	case <-w.granted: // granted as the wait ended: give it back
		s.held[cluster]--
		s.grant()
	default:
		s.waiting = slices.DeleteFunc(s.waiting, func(o *slotWaiter) bool { return o == w })
	}
	return nil, false
}

func (s *checkSlots) release(cluster string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.held[cluster]--; s.held[cluster] <= 0 {
		delete(s.held, cluster)
	}
	s.grant()
}

// grant hands free slots to waiters, the longest waiting first, each while its cluster is
// under its share; the caller holds s.mu.
func (s *checkSlots) grant() {
	for i := 0; i < len(s.waiting); {
		w := s.waiting[i]
		if !s.mayTake(w.cluster) {
			i++
			continue
		}
		s.held[w.cluster]++
		close(w.granted)
		s.waiting = slices.Delete(s.waiting, i, i+1)
	}
}

// mayTake says whether the cluster may take one more slot now; the caller holds s.mu.
func (s *checkSlots) mayTake(cluster string) bool {
	used := 0
	active := map[string]bool{cluster: true}
	for c, n := range s.held {
		used += n
		active[c] = true
	}
	for _, w := range s.waiting {
		active[w.cluster] = true
	}
	return used < s.total && s.held[cluster] < s.share(len(active))
}

// share is what one of active clusters may hold at once.
func (s *checkSlots) share(active int) int {
	alone := s.total - max(1, s.total/4)
	return max(1, min(alone, s.total/active))
}

// inUse is how many slots are held, for tests and the log.
func (s *checkSlots) inUse() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for _, h := range s.held {
		n += h
	}
	return n
}
