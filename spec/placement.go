package spec

import (
	"fmt"
	"maps"
	"slices"
	"strings"
)

// Placement says which hosts may hold a role's members. The zero value places members on
// every host, with no limit and no spreading.
type Placement struct {
	// Hosts selects hosts by label: a host must carry every label with the value given.
	Hosts map[string]string `json:"hosts,omitempty"`
	// MaxPerHost caps the role's members on one host; 0 means no cap.
	MaxPerHost int `json:"maxPerHost,omitempty"`
	// SpreadBy keeps the role even across the values of this host label.
	SpreadBy string `json:"spreadBy,omitempty"`
}

// Matches reports whether a host with these labels is selected.
func (p Placement) Matches(labels map[string]string) bool {
	for k, v := range p.Hosts {
		if got, ok := labels[k]; !ok || got != v {
			return false
		}
	}
	return true
}

// Selector writes the label selector as k=v,k=v, sorted, or "" when it selects every host.
func (p Placement) Selector() string {
	var parts []string
	for _, k := range slices.Sorted(maps.Keys(p.Hosts)) {
		parts = append(parts, k+"="+p.Hosts[k])
	}
	return strings.Join(parts, ",")
}

type draftPlacement struct {
	Hosts      map[string]string
	MaxPerHost *int
	SpreadBy   *string
}

func checkPlacement(path string, d *draftPlacement, ps *problems) Placement {
	if d == nil {
		return Placement{}
	}
	p := Placement{Hosts: d.Hosts}
	for _, k := range sortedKeys(d.Hosts) {
		if err := CheckLabel(k, d.Hosts[k]); err != nil {
			ps.add(path+".hosts."+k, "%v", err)
		}
	}
	if d.MaxPerHost != nil {
		p.MaxPerHost = *d.MaxPerHost
		if p.MaxPerHost < 1 {
			ps.add(path+".maxPerHost", "is %d; it must be at least 1 (leave it out for no limit)", p.MaxPerHost)
		}
	}
	if d.SpreadBy != nil {
		p.SpreadBy = *d.SpreadBy
		if err := CheckLabel(p.SpreadBy, ""); err != nil {
			ps.add(path+".spreadBy", "%v", err)
		}
	}
	return p
}

// CheckLabel checks a host label's key and value: both are short words, so that they read
// well in k=v lists and selectors.
func CheckLabel(key, value string) error {
	if key == "" || len(key) > 63 || strings.ContainsAny(key, "=, \t\n") {
		return fmt.Errorf("label key %q must be 1 to 63 characters, without '=', ',' or spaces", key)
	}
	if len(value) > 63 || strings.ContainsAny(value, "=, \t\n") {
		return fmt.Errorf("label value %q must be at most 63 characters, without '=', ',' or spaces", value)
	}
	return nil
}

// ParseLabels reads k=v,k=v as a worker's --labels flag writes them.
func ParseLabels(s string) (map[string]string, error) {
	labels := map[string]string{}
	if strings.TrimSpace(s) == "" {
		return labels, nil
	}
	for _, part := range strings.Split(s, ",") {
		k, v, ok := strings.Cut(strings.TrimSpace(part), "=")
		if !ok {
			return nil, fmt.Errorf("%q is not key=value", part)
		}
		if err := CheckLabel(k, v); err != nil {
			return nil, err
		}
		if _, dup := labels[k]; dup {
			return nil, fmt.Errorf("label %q is given twice", k)
		}
		labels[k] = v
	}
	return labels, nil
}
