package spec

import "encoding/json"

// RuntimeHash is the SHA-256 of how a role's members run beyond their startscript and env:
// their container (image, user, resources, volumes, published ports, privileges), their
// limits and their probe, as a run carries them (nil: none); "" when none is set. What a
// signature covers of a role (Signature.Runtime), and what a host that trusts keys checks
// a run that sets a member up against.
func RuntimeHash(container *Container, limits Limits, probe *Probe) string {
	if container == nil && limits == (Limits{}) && probe == nil {
		return ""
	}
	data, _ := json.Marshal(struct {
		Container *Container `json:"container,omitempty"`
		Limits    Limits     `json:"limits"`
		Probe     *Probe     `json:"probe,omitempty"`
	}{container, limits, probe})
	return ContentHash(data)
}

// RuntimeHash is the role's, as its runs that set a member up carry its fields: its
// container when it sets any field of one, its probe, with defaults, when it lists check.
func (r Role) RuntimeHash() string {
	var container *Container
	if len(ContainerFields(r.Container)) > 0 {
		c := r.Container
		container = &c
	}
	var probe *Probe
	if r.Wants(EventCheck) {
		p := r.Probe.WithDefaults()
		probe = &p
	}
	return RuntimeHash(container, r.Limits, probe)
}
