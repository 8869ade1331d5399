package agent

import (
	"context"
	"slices"
	"sync"
	"time"
)

// checkSlots are the host's check slots, shared fairly between the clusters that check
// members here: one cluster alone holds all but a quarter of them (at least one is always
// left), and while others want them, its even share; a slot freed goes to the cluster, in
// turn, whose oldest check waits longest and which is under its share. So the checks of one
// cluster, however many and however slow (a hung check holds its slot until its timeout, at
// most spec.MaxProbeTimeout), never stop another cluster's: those find a slot left, at once.
//
// A thousand members checked every second wait here together: each step costs in the
// number of clusters, never in the number of waiters.
type checkSlots struct {
	mu          sync.Mutex
	total, used int
	held        map[string]int
	// queues are each cluster's waiters, oldest first; order the clusters with any, in
	// turn; wanting counts each cluster's held and waiting checks (its being active).
	queues  map[string][]*slotWaiter
	order   []string
	wanting map[string]int
}

type slotWaiter struct {
	cluster string
	granted chan struct{}
}

func newCheckSlots(total int) *checkSlots {
	return &checkSlots{total: max(total, 1), held: map[string]int{}, queues: map[string][]*slotWaiter{}, wanting: map[string]int{}}
}

// acquire takes a slot for a check of the cluster (its key), waiting at most within; it
// returns the slot's release, or false when none came in time or ctx ended.
func (s *checkSlots) acquire(ctx context.Context, cluster string, within time.Duration) (release func(), ok bool) {
	release = func() { s.release(cluster) }
	s.mu.Lock()
	if len(s.queues[cluster]) == 0 && s.mayTake(cluster) {
		s.take(cluster)
		s.mu.Unlock()
		return release, true
	}
	w := &slotWaiter{cluster: cluster, granted: make(chan struct{})}
	if len(s.queues[cluster]) == 0 {
		s.order = append(s.order, cluster)
	}
	s.queues[cluster] = append(s.queues[cluster], w)
	s.wanting[cluster]++
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
		s.give(cluster)
	default:
		q := s.queues[cluster]
		if i := slices.Index(q, w); i >= 0 {
			s.dequeue(cluster, i)
			s.unwant(cluster)
			s.grant() // one cluster fewer may leave the others a larger share
		}
	}
	return nil, false
}

func (s *checkSlots) release(cluster string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.give(cluster)
}

// take gives the cluster a slot; give takes it back and hands free slots on. The caller
// holds s.mu.
func (s *checkSlots) take(cluster string) {
	s.held[cluster]++
	s.wanting[cluster]++
	s.used++
}

func (s *checkSlots) give(cluster string) {
	s.used--
	if s.held[cluster]--; s.held[cluster] <= 0 {
		delete(s.held, cluster)
	}
	s.unwant(cluster)
	s.grant()
}

func (s *checkSlots) unwant(cluster string) {
	if s.wanting[cluster]--; s.wanting[cluster] <= 0 {
		delete(s.wanting, cluster)
	}
}

// dequeue removes the cluster's i-th waiter, which no longer waits; the caller holds s.mu.
func (s *checkSlots) dequeue(cluster string, i int) {
	q := slices.Delete(s.queues[cluster], i, i+1)
	s.queues[cluster] = q
	if len(q) == 0 {
		delete(s.queues, cluster)
		s.order = slices.DeleteFunc(s.order, func(c string) bool { return c == cluster })
	}
}

// grant hands free slots to waiters, cluster by cluster in turn, each while its cluster is
// under its share; the caller holds s.mu.
func (s *checkSlots) grant() {
	for s.used < s.total {
		i := slices.IndexFunc(s.order, s.mayTake)
		if i < 0 {
			return
		}
		cluster := s.order[i]
		w := s.queues[cluster][0]
		s.dequeue(cluster, 0)
		s.held[cluster]++ // already counted as wanting, while it waited
		s.used++
		close(w.granted)
		if len(s.queues[cluster]) > 0 { // its next waiter goes to the back of the turn
			s.order = append(slices.DeleteFunc(s.order, func(c string) bool { return c == cluster }), cluster)
		}
	}
}

// mayTake says whether the cluster may take one more slot now; the caller holds s.mu.
func (s *checkSlots) mayTake(cluster string) bool {
	active := len(s.wanting)
	if s.wanting[cluster] == 0 {
		active++
	}
	return s.used < s.total && s.held[cluster] < s.share(active)
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
	return s.used
}
