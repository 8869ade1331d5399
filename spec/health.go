package spec

import (
	"fmt"
	"strconv"
	"strings"
	"time"
)

// Health defaults, applied wherever a role leaves a field out (including specs sent before
// member health existed, whose Health is zero).
const (
	DefaultReplaceAfter    = 5 * time.Minute
	DefaultFlapLimit       = 3
	DefaultFlapWindow      = 10 * time.Minute
	DefaultMaxUnavailable  = "50%"
	DefaultMaxReplacements = 3
	DefaultReconcileEvery  = time.Minute
	// MinHealthInterval keeps timers and reconciles from spinning.
	MinHealthInterval = time.Second
)

// Health is how clusterflow reacts to member-health events for one role.
type Health struct {
	// ReplaceAfter is how long a member may stay down before it is replaced.
	ReplaceAfter time.Duration `json:"replaceAfter,omitempty"`
	// A member that recovers more than FlapLimit times within FlapWindow is flapping: it
	// is left alone rather than replaced.
	FlapLimit  int           `json:"flapLimit,omitempty"`
	FlapWindow time.Duration `json:"flapWindow,omitempty"`
	// MaxUnavailable is "N" or "N%" of the role's members; with more than that down at
	// once, automatic replacement pauses for the role (the meltdown guard).
	MaxUnavailable string `json:"maxUnavailable,omitempty"`
	// ReplaceOnConfigError replaces a member whose setup failed, up to MaxReplacements
	// times for one member slot.
	ReplaceOnConfigError bool `json:"replaceOnConfigError,omitempty"`
	MaxReplacements      int  `json:"maxReplacements,omitempty"`
}

// WithDefaults fills in every field left out.
func (h Health) WithDefaults() Health {
	if h.ReplaceAfter == 0 {
		h.ReplaceAfter = DefaultReplaceAfter
	}
	if h.FlapLimit == 0 {
		h.FlapLimit = DefaultFlapLimit
	}
	if h.FlapWindow == 0 {
		h.FlapWindow = DefaultFlapWindow
	}
	if h.MaxUnavailable == "" {
		h.MaxUnavailable = DefaultMaxUnavailable
	}
	if h.MaxReplacements == 0 {
		h.MaxReplacements = DefaultMaxReplacements
	}
	return h
}

// UnavailableLimit is how many of a role's size members may be unavailable at once before
// the meltdown guard pauses replacement: MaxUnavailable of size, and at least 1.
func (h Health) UnavailableLimit(size int) int {
	limit, err := parseMaxUnavailable(h.WithDefaults().MaxUnavailable, size)
	if err != nil {
		limit, _ = parseMaxUnavailable(DefaultMaxUnavailable, size)
	}
	return max(limit, 1)
}

func parseMaxUnavailable(text string, size int) (int, error) {
	digits, percent := strings.CutSuffix(text, "%")
	n, err := strconv.Atoi(digits)
	if err != nil || n < 0 || strings.TrimLeft(digits, "0123456789") != "" {
		return 0, fmt.Errorf("%q is not a count or a percentage (e.g. 1 or 50%%)", text)
	}
	if !percent {
		return n, nil
	}
	if n > 100 {
		return 0, fmt.Errorf("%q is more than 100%%", text)
	}
	return size * n / 100, nil
}

// ReconcileInterval is how often the cluster is compared with what the backend has.
func (c Cluster) ReconcileInterval() time.Duration {
	if c.ReconcileEvery == 0 {
		return DefaultReconcileEvery
	}
	return c.ReconcileEvery
}

func checkHealth(path string, d draftRole, ps *problems) Health {
	var h Health
	positive := func(field string, v *time.Duration) time.Duration {
		if v == nil {
			return 0
		}
		if *v < MinHealthInterval {
			ps.add(path+"."+field, "is %s; it must be at least %s", *v, MinHealthInterval)
		}
		return *v
	}
	h.ReplaceAfter = positive("replaceAfter", d.ReplaceAfter)
	h.FlapWindow = positive("flapWindow", d.FlapWindow)
	if d.FlapLimit != nil {
		h.FlapLimit = *d.FlapLimit
		if h.FlapLimit < 1 {
			ps.add(path+".flapLimit", "is %d; it must be at least 1", h.FlapLimit)
		}
	}
	if d.MaxUnavailable != nil {
		h.MaxUnavailable = *d.MaxUnavailable
		if _, err := parseMaxUnavailable(h.MaxUnavailable, 100); err != nil {
			ps.add(path+".maxUnavailable", "%v", err)
		}
	}
	if d.ReplaceOnConfigError != nil {
		h.ReplaceOnConfigError = *d.ReplaceOnConfigError
	}
	if d.MaxReplacements != nil {
		h.MaxReplacements = *d.MaxReplacements
		if h.MaxReplacements < 1 {
			ps.add(path+".maxReplacements", "is %d; it must be at least 1 (set replaceOnConfigError: false to never replace)", h.MaxReplacements)
		}
	}
	return h
}
