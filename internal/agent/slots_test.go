package agent

import (
	"context"
	"testing"
	"time"
)

// One cluster's checks, however many hang, leave a quarter of the host's slots; another
// cluster's check still gets one at once.
func TestOneClustersChecksLeaveSlotsForAnother(t *testing.T) {
	s := newCheckSlots(8)
	var hung int
	for range 16 {
		if _, ok := s.acquire(context.Background(), "hung", 20*time.Millisecond); ok {
			hung++
		}
	}
	if hung != 6 {
		t.Errorf("one cluster alone holds %d of 8 slots, want all but a quarter, 6", hung)
	}
	if _, ok := s.acquire(context.Background(), "other", 20*time.Millisecond); !ok {
		t.Error("another cluster got no slot while the first one's checks hang")
	}
}

// With several clusters checking, each holds at most its even share, and a freed slot
// goes to the cluster waiting under its share, not back to the one that freed it.
func TestAFreedSlotGoesToAClusterUnderItsShare(t *testing.T) {
	s := newCheckSlots(4)
	var aReleases []func()
	for range 2 {
		release, ok := s.acquire(context.Background(), "a", time.Second)
		if !ok {
			t.Fatal("a: no slot")
		}
		aReleases = append(aReleases, release)
	}
	for range 2 {
		if _, ok := s.acquire(context.Background(), "b", time.Second); !ok {
			t.Fatal("b: no slot")
		}
	}
	// Full: c waits, and a, over its share of three clusters (1), may not take the freed slot.
	got := make(chan bool, 1)
	go func() {
		_, ok := s.acquire(context.Background(), "c", 5*time.Second)
		got <- ok
	}()
	waitUntil(t, func() bool { s.mu.Lock(); defer s.mu.Unlock(); return len(s.queues["c"]) == 1 })
	if _, ok := s.acquire(context.Background(), "a", 50*time.Millisecond); ok {
		t.Error("a, at its share, took a slot while c waited")
	}
	aReleases[0]()
	if !<-got {
		t.Error("c got no slot when a freed one")
	}
	if n := s.inUse(); n != 4 {
		t.Errorf("%d slots in use, want 4", n)
	}
}

// A wait for a slot ends at its deadline, and a wait that ends leaves nothing held.
func TestASlotWaitEndsAtItsDeadline(t *testing.T) {
	s := newCheckSlots(2)
	release, ok := s.acquire(context.Background(), "a", time.Second)
	if !ok {
		t.Fatal("no slot")
	}
	start := time.Now()
	if _, ok := s.acquire(context.Background(), "a", 100*time.Millisecond); ok {
		t.Fatal("a second slot for a cluster of a two-slot host")
	}
	if waited := time.Since(start); waited < 100*time.Millisecond {
		t.Errorf("the wait ended after %s, before its deadline", waited)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, ok := s.acquire(ctx, "a", time.Minute); ok {
		t.Error("a slot past its context's end")
	}
	release()
	if n := s.inUse(); n != 0 {
		t.Errorf("%d slots held after every release", n)
	}
	if len(s.queues) != 0 || len(s.order) != 0 || len(s.wanting) != 0 {
		t.Errorf("left after every wait ended: queues %v, order %v, wanting %v", s.queues, s.order, s.wanting)
	}
}

func waitUntil(t *testing.T, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); !cond(); time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("timed out")
		}
	}
}

// A thousand checks of one cluster waiting together cost little: each release hands on in
// steps of the clusters, not of the waiters (it was quadratic in them).
func TestAThousandWaitersAreServedInTurn(t *testing.T) {
	s := newCheckSlots(8)
	done := make(chan bool, 1000)
	for i := range 1000 {
		cluster := "big"
		if i%100 == 0 {
			cluster = "small"
		}
		go func() {
			release, ok := s.acquire(context.Background(), cluster, 10*time.Second)
			if ok {
				time.Sleep(time.Millisecond)
				release()
			}
			done <- ok
		}()
	}
	start := time.Now()
	for range 1000 {
		if !<-done {
			t.Fatal("a check found no slot within 10 s")
		}
	}
	if took := time.Since(start); took > 5*time.Second {
		t.Errorf("a thousand checks of a millisecond on 8 slots took %s", took)
	}
	if n := s.inUse(); n != 0 {
		t.Errorf("%d slots held after every release", n)
	}
}
