package fleetsim

import (
	"context"
	"slices"
	"sync"
	"time"

	"github.com/clusterflow/clusterflow/internal/backend"
)

// sharedBackend is the one backend of the simulated hosts, with which host each member was
// placed on: a real host's listing holds only its own members, and reconcile takes a
// member listed on another host than its own for a stale copy to remove.
type sharedBackend struct {
	backend.Backend
	mu     sync.Mutex
	hostOf map[memberKey]string
}

type memberKey struct{ cluster, member string }

func keyOf(m backend.MemberRef) memberKey {
	return memberKey{backend.ClusterRef{Name: m.Cluster, Home: m.Home}.Key(), m.Name}
}

// hostView is the shared backend as one simulated host sees it.
type hostView struct {
	*sharedBackend
	host string
	// slowWrites is how long each write of cluster files waits before it runs (Options).
	slowWrites time.Duration
}

func (v hostView) WriteClusterFiles(ctx context.Context, files backend.ClusterFiles) error {
	if v.slowWrites > 0 {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(v.slowWrites):
		}
	}
	return v.Backend.WriteClusterFiles(ctx, files)
}

func (v hostView) hold(m backend.MemberRef) {
	v.mu.Lock()
	defer v.mu.Unlock()
	v.hostOf[keyOf(m)] = v.host
}

func (v hostView) CreateMember(ctx context.Context, m backend.MemberRef) error {
	v.hold(m)
	return v.Backend.CreateMember(ctx, m)
}

func (v hostView) LaunchScript(ctx context.Context, run backend.ScriptRun, to backend.Completion) error {
	v.hold(run.Member)
	return v.Backend.LaunchScript(ctx, run, to)
}

func (v hostView) RemoveMember(ctx context.Context, m backend.MemberRef) error {
	if err := v.Backend.RemoveMember(ctx, m); err != nil {
		return err
	}
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.hostOf[keyOf(m)] == v.host {
		delete(v.hostOf, keyOf(m))
	}
	return nil
}

// ListMembers lists the cluster's members placed on this host only.
func (v hostView) ListMembers(ctx context.Context, key string) ([]backend.MemberRef, error) {
	all, err := v.Backend.ListMembers(ctx, key)
	if err != nil {
		return nil, err
	}
	v.mu.Lock()
	defer v.mu.Unlock()
	return slices.DeleteFunc(all, func(m backend.MemberRef) bool { return v.hostOf[memberKey{key, m.Name}] != v.host }), nil
}

// ListClusters lists the clusters with members on this host only.
func (v hostView) ListClusters(ctx context.Context) ([]backend.HeldCluster, error) {
	all, err := v.Backend.ListClusters(ctx)
	if err != nil {
		return nil, err
	}
	v.mu.Lock()
	defer v.mu.Unlock()
	return slices.DeleteFunc(all, func(c backend.HeldCluster) bool { return !v.holdsAny(c.Key(), v.host) }), nil
}

// RemoveCluster removes the cluster's folder once no host holds a member of it: the
// hosts share it.
func (v hostView) RemoveCluster(ctx context.Context, key string) error {
	v.mu.Lock()
	held := v.holdsAny(key, "")
	v.mu.Unlock()
	if held {
		return nil
	}
	return v.Backend.RemoveCluster(ctx, key)
}

// holdsAny reports whether host ("": any host) holds a member of the cluster; mu is held.
func (s *sharedBackend) holdsAny(key, host string) bool {
	for k, h := range s.hostOf {
		if k.cluster == key && (host == "" || h == host) {
			return true
		}
	}
	return false
}
