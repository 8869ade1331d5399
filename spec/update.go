package spec

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"
)

// Update defaults, applied wherever a role's update block leaves a field out.
const (
	DefaultCanaries    = 1
	DefaultUpdateWatch = 10 * time.Second
	// MaxUpdateWatch bounds a watch: a rollout's timers must end within an operator's day.
	MaxUpdateWatch = 24 * time.Hour
)

// UpdateStrategy is how a role's members take a new revision.
type UpdateStrategy string

const (
	// InPlace runs the upgrade event on each member, with the new revision's script and env.
	InPlace UpdateStrategy = "inPlace"
	// Replace sets up a new member with the new revision, announces it, then removes the old.
	Replace UpdateStrategy = "replace"
)

// Update is how a role rolls out a new revision (BOSH's update block, Nomad's update
// stanza): canaries first, alone, then batches of MaxInFlight, each member watched for
// Watch before the next batch starts.
type Update struct {
	// Strategy is "" for the default: inPlace when the role lists upgrade, else replace.
	Strategy UpdateStrategy `json:"strategy,omitempty"`
	// Canaries is how many members go first, alone; nil-able through CanariesSet so that 0
	// can be asked for.
	Canaries    int  `json:"canaries,omitempty"`
	CanariesSet bool `json:"canariesSet,omitempty"`
	// MaxInFlight is "N" or "N%" of the role's members; "" is 1.
	MaxInFlight string `json:"maxInFlight,omitempty"`
	// WatchMin and WatchMax are how long an updated member is watched: it counts after
	// WatchMin once an up report came after its update, else after WatchMax. Zero WatchMax
	// is DefaultUpdateWatch for both.
	WatchMin time.Duration `json:"watchMin,omitempty"`
	WatchMax time.Duration `json:"watchMax,omitempty"`
	WatchSet bool          `json:"watchSet,omitempty"`
	// Parallel lets the roles of a dependency level roll together; by default they roll
	// one at a time (BOSH's serial).
	Parallel bool `json:"parallel,omitempty"`
}

// StrategyFor is the strategy the role's members are updated by.
func (r Role) StrategyFor() UpdateStrategy {
	switch {
	case r.Update.Strategy != "":
		return r.Update.Strategy
	case r.Wants(EventUpgrade):
		return InPlace
	}
	return Replace
}

// CanaryCount is how many members go first, alone.
func (u Update) CanaryCount() int {
	if u.CanariesSet {
		return u.Canaries
	}
	return DefaultCanaries
}

// BatchSize is how many of a role of size members update at once after the canaries; at
// least 1.
func (u Update) BatchSize(size int) int {
	if u.MaxInFlight == "" {
		return 1
	}
	n, err := parseMaxUnavailable(u.MaxInFlight, size)
	if err != nil {
		return 1
	}
	return max(n, 1)
}

// Watch is how long an updated member is watched: at least min, at most max.
func (u Update) Watch() (minWatch, maxWatch time.Duration) {
	if !u.WatchSet {
		return DefaultUpdateWatch, DefaultUpdateWatch
	}
	return u.WatchMin, u.WatchMax
}

type draftUpdate struct {
	Strategy    *string
	Canaries    *int
	MaxInFlight *string
	Watch       *string
	Parallel    *bool
}

func (w walker) update(path string, n *yaml.Node) *draftUpdate {
	u := &draftUpdate{}
	w.mapping(path, n, map[string]func(string, *yaml.Node){
		"strategy":    func(p string, n *yaml.Node) { u.Strategy = w.str(p, n) },
		"canaries":    func(p string, n *yaml.Node) { u.Canaries = w.integer(p, n) },
		"maxInFlight": func(p string, n *yaml.Node) { u.MaxInFlight = w.str(p, n) },
		"watch":       func(p string, n *yaml.Node) { u.Watch = w.str(p, n) },
		"parallel":    func(p string, n *yaml.Node) { u.Parallel = w.boolean(p, n) },
	})
	return u
}

func checkUpdate(path string, d *draftUpdate, r Role, ps *problems) Update {
	if d == nil {
		return Update{}
	}
	var u Update
	if d.Strategy != nil {
		u.Strategy = UpdateStrategy(*d.Strategy)
		switch u.Strategy {
		case InPlace:
			if !r.Wants(EventUpgrade) {
				ps.add(path+".strategy", "is inPlace, but the role's events do not list upgrade, which inPlace runs")
			}
		case Replace:
		default:
			ps.add(path+".strategy", "unknown strategy %q (known: inPlace, replace)", *d.Strategy)
		}
	}
	if d.Canaries != nil {
		u.Canaries, u.CanariesSet = *d.Canaries, true
		if u.Canaries < 0 {
			ps.add(path+".canaries", "is %d; it must be 0 or more", u.Canaries)
		}
	}
	if d.MaxInFlight != nil {
		u.MaxInFlight = *d.MaxInFlight
		if n, err := parseMaxUnavailable(u.MaxInFlight, 100); err != nil {
			ps.add(path+".maxInFlight", "%v", err)
		} else if n == 0 {
			ps.add(path+".maxInFlight", "is %q; it must let at least one member update at once", u.MaxInFlight)
		}
	}
	if d.Watch != nil {
		minWatch, maxWatch, err := ParseWatch(*d.Watch)
		if err != nil {
			ps.add(path+".watch", "%v", err)
		}
		u.WatchMin, u.WatchMax, u.WatchSet = minWatch, maxWatch, true
	}
	if d.Parallel != nil {
		u.Parallel = *d.Parallel
	}
	return u
}

// ParseWatch reads a watch: "30s", or a BOSH range "10s-60s".
func ParseWatch(text string) (minWatch, maxWatch time.Duration, err error) {
	low, high, isRange := strings.Cut(text, "-")
	if minWatch, err = time.ParseDuration(strings.TrimSpace(low)); err != nil {
		return 0, 0, fmt.Errorf("%q is not a duration or a range of two (e.g. 30s or 10s-60s)", text)
	}
	maxWatch = minWatch
	if isRange {
		if maxWatch, err = time.ParseDuration(strings.TrimSpace(high)); err != nil {
			return 0, 0, fmt.Errorf("%q is not a duration or a range of two (e.g. 30s or 10s-60s)", text)
		}
	}
	switch {
	case minWatch < 0:
		return 0, 0, fmt.Errorf("%q is negative", text)
	case maxWatch < minWatch:
		return 0, 0, fmt.Errorf("%q ends before it starts", text)
	case maxWatch > MaxUpdateWatch:
		return 0, 0, fmt.Errorf("%q is longer than %s", text, MaxUpdateWatch)
	}
	return minWatch, maxWatch, nil
}

// String writes the watch as the spec does.
func (u Update) String() string {
	minWatch, maxWatch := u.Watch()
	watch := minWatch.String()
	if maxWatch != minWatch {
		watch += "-" + maxWatch.String()
	}
	batch := u.MaxInFlight
	if batch == "" {
		batch = "1"
	}
	return fmt.Sprintf("canaries %s, maxInFlight %s, watch %s", strconv.Itoa(u.CanaryCount()), batch, watch)
}
