package workflows

import (
	"encoding/json"
	"fmt"

	"github.com/clusterflow/clusterflow/internal/gzjson"
	"github.com/clusterflow/clusterflow/internal/payloadlimit"
	"github.com/clusterflow/clusterflow/spec"
	"github.com/clusterflow/clusterflow/workflows/plan"
)

// Carry puts the state for the next run into the input: as plain JSON, readable in the Web
// UI, or gzipped for a cluster of thousands of members. Continue-as-new input is not
// compared on replay, and packing is deterministic anyway.
//
// The input, spec and state together, must fit in one payload. The spec is bounded (scripts,
// env and roles; see spec), and so are the members, so what the state needs fits
// in what is left: about 16 bytes a member gzipped, 20,000 members in about 320 KiB. What a
// member may add beyond that, its output tails, health history and detail, is shed as
// packCarried describes when it would not fit.
func (in *ClusterInput) Carry(c Carried) error {
	plain, packed, err := packCarried(c, PayloadSize(in.Spec))
	in.Carried, in.CarriedGzip = plain, packed
	return err
}

// carriedRoom is what a packed state may take beside a spec of specSize bytes.
func carriedRoom(specSize int) int {
	return payloadlimit.Default - specSize - 16<<10
}

// packCarried packs c to fit beside a spec of specSize bytes: plain when small, else
// gzipped, and past the room left, with what users see of a member's past trimmed, step
// by step, until it fits: first the output tails (they are in `logs`), then health
// histories down to their last 3 steps, then all of them, then details. What the workflow
// decides with (states, hosts, who knows whom, deadlines) is never trimmed; a state that
// does not fit without those is an error.
func packCarried(c Carried, specSize int) (*Carried, []byte, error) {
	room := carriedRoom(specSize)
	for step := 0; ; step++ {
		packed, err := gzjson.PackIfLarge(c)
		if err != nil {
			return nil, nil, err
		}
		if packed == nil {
			return &c, nil, nil
		}
		if len(packed) <= room {
			return nil, packed, nil
		}
		if step == len(trimSteps) {
			return nil, nil, &payloadlimit.TooLargeError{Size: len(packed) + specSize, Limit: payloadlimit.Default}
		}
		c.State = c.State.trimmed(trimSteps[step])
	}
}

// trimSteps are what packCarried sheds, in order.
var trimSteps = []func(m *Member){
	func(m *Member) { m.StdoutTail, m.StderrTail = "", "" },
	func(m *Member) {
		if m.Health != nil {
			h := *m.Health
			if n := len(h.Transitions); n > 3 {
				h.Transitions = h.Transitions[n-3:]
			}
			h.Transitions = append([]HealthTransition(nil), h.Transitions...)
			for i := range h.Transitions {
				h.Transitions[i].Reason = spec.Clip(h.Transitions[i].Reason, 128)
				h.Transitions[i].Source = spec.Clip(h.Transitions[i].Source, 128)
			}
			m.Health = &h
		}
	},
	func(m *Member) {
		if m.Health != nil {
			h := *m.Health
			h.Transitions = nil
			m.Health = &h
		}
	},
	func(m *Member) { m.Detail, m.LastLine = "", "" },
}

// trimmed is a copy of the state with trim applied to every member.
func (s ClusterState) trimmed(trim func(m *Member)) ClusterState {
	roles := make([]plan.RoleState, len(s.Roles))
	for i, rs := range s.Roles {
		rs.Members = append([]Member(nil), rs.Members...)
		for j := range rs.Members {
			trim(&rs.Members[j])
		}
		roles[i] = rs
	}
	s.Roles = roles
	return s
}

// ReadCarried is the state a previous run handed over, if any.
func (in ClusterInput) ReadCarried() (*Carried, error) {
	if len(in.CarriedGzip) == 0 {
		return in.Carried, nil
	}
	var c Carried
	if err := gzjson.Unmarshal(in.CarriedGzip, &c); err != nil {
		return nil, fmt.Errorf("unpack the carried state: %w", err)
	}
	return &c, nil
}

// PayloadSize is the size of v as JSON, which is how the SDK's default converter sends it.
func PayloadSize(v any) int {
	data, err := json.Marshal(v)
	if err != nil {
		return 0
	}
	return len(data)
}
