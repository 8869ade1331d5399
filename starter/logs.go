package starter

import (
	"context"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/google/uuid"
	"go.temporal.io/sdk/client"

	"github.com/clusterflow/clusterflow/internal/apperr"
	"github.com/clusterflow/clusterflow/internal/backend"
	"github.com/clusterflow/clusterflow/spec"
	"github.com/clusterflow/clusterflow/workflows"
)

// LogOptions choose what Logs shows.
type LogOptions struct {
	// Event defaults to the event the member runs now, or ran last.
	Event spec.Event
	// Tail shows only the last Tail lines of each stream so far; 0 shows them all.
	Tail int
	// Follow keeps showing new output while the member runs the event.
	Follow bool
}

// removedMember is what Logs needs of a member removed from the cluster, whose output its
// host keeps for a while: one whose teardown failed (status names its host), or, in
// single-host mode, any member the cluster could have had; nil otherwise.
func removedMember(status workflows.ClusterStatus, member string) *workflows.MemberStatus {
	for _, f := range slices.Backward(status.FailedTeardowns) {
		if f.Member == member {
			return &workflows.MemberStatus{Name: member, Role: f.Role, Host: f.Host, Event: spec.EventTeardown}
		}
	}
	role, _, ok := spec.ParseMemberName(status.Name, member)
	if !ok || status.Role(role) == nil {
		return nil
	}
	for _, r := range status.Roles {
		for _, m := range r.Members {
			if m.Host != "" {
				return nil // on hosts: which one held it is not known
			}
		}
	}
	return &workflows.MemberStatus{Name: member, Role: role, Event: spec.EventTeardown}
}

// logChunkLimit bounds one read of a stream.
const logChunkLimit = 256 << 10

// Logs writes a member's script output for one event to stdout and stderr, reading it on
// whichever host holds the member.
func (s *Starter) Logs(ctx context.Context, cluster, member string, opts LogOptions, stdout, stderr io.Writer) error {
	status, err := s.Status(ctx, cluster)
	if err != nil {
		return err
	}
	m := status.Member(member)
	if m == nil {
		m = removedMember(status, member)
	}
	if m == nil {
		return apperr.Errorf(apperr.NotFound, "cluster %s has no member %q (see `clusterflow status %s`)", cluster, member, cluster)
	}
	event := opts.Event
	if event == "" {
		event = m.Event
	}
	if event == "" {
		event = spec.EventConfigure
	}
	req := backend.LogRequest{
		Member: backend.MemberRef{Cluster: cluster, Home: status.Home, Role: m.Role, Name: member},
		Event:  event, Limit: logChunkLimit,
	}
	if opts.Tail > 0 {
		req.StdoutOffset, req.StderrOffset = -logChunkLimit, -logChunkLimit
	}
	host := m.Host
	first := true
	for {
		chunk, err := s.readLog(ctx, host, req)
		if err != nil {
			return err
		}
		if first && chunk.Missing && !opts.Follow {
			return apperr.Errorf(apperr.NotFound, "%s has no %s output on host %s", member, event, hostName(host))
		}
		out, errOut := chunk.Stdout, chunk.Stderr
		if first && opts.Tail > 0 {
			out, errOut = lastLines(out, opts.Tail), lastLines(errOut, opts.Tail)
		}
		first = false
		_, _ = io.WriteString(stdout, out)
		_, _ = io.WriteString(stderr, errOut)
		req.StdoutOffset, req.StderrOffset = chunk.StdoutOffset, chunk.StderrOffset
		if out != "" || errOut != "" {
			continue // more may be waiting already
		}
		if !opts.Follow {
			return nil
		}
		if status, err = s.Status(ctx, cluster); err != nil {
			return err
		}
		if m := status.Member(member); m == nil || !runs(*m, event) {
			// Its last output may have landed since the read above.
			chunk, err := s.readLog(ctx, host, req)
			if err == nil {
				_, _ = io.WriteString(stdout, chunk.Stdout)
				_, _ = io.WriteString(stderr, chunk.Stderr)
			}
			return err
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(time.Second):
		}
	}
}

// readLog reads once, through a MemberLogWorkflow on the member's host.
func (s *Starter) readLog(ctx context.Context, host string, req backend.LogRequest) (backend.LogChunk, error) {
	run, err := s.client.ExecuteWorkflow(ctx, client.StartWorkflowOptions{
		ID:        workflows.MemberLogWorkflowID(req.Member.Cluster, req.Member.Name, uuid.NewString()),
		TaskQueue: s.taskQueue,
	}, workflows.MemberLogWorkflowName, workflows.MemberLogInput{Host: host, Request: req})
	var chunk backend.LogChunk
	if err == nil {
		err = run.Get(ctx, &chunk)
	}
	if err != nil {
		return chunk, fmt.Errorf("read the output of %s on host %s: %w", req.Member.Name, hostName(host), err)
	}
	return chunk, nil
}

// runs reports whether the member is running the event now, or is about to: the status
// can lag a script that has already started, and following a member that waits for its
// configure should wait with it.
func runs(m workflows.MemberStatus, event spec.Event) bool {
	switch {
	case event == spec.EventConfigure:
		return m.State == workflows.MemberPending || m.State == workflows.MemberCreating || m.State == workflows.MemberConfiguring
	case event == spec.EventTeardown:
		return m.State == workflows.MemberDeleting && m.Event == event
	}
	return m.Event == event && strings.HasPrefix(m.Detail, "running "+string(event))
}

func hostName(host string) string {
	if host == "" {
		return workflows.LocalHost
	}
	return host
}

// lastLines keeps the last n lines of text.
func lastLines(text string, n int) string {
	lines := strings.SplitAfter(text, "\n")
	if lines[len(lines)-1] == "" {
		lines = lines[:len(lines)-1]
	}
	return strings.Join(lines[max(0, len(lines)-n):], "")
}
