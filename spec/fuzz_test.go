package spec

import (
	"testing"

	"github.com/clusterflow/clusterflow/internal/apperr"
)

// FuzzParse feeds the spec parser any bytes: it must never panic, and a spec it accepts
// has a valid name and at least one role. The seeds are in testdata/fuzz and below.
func FuzzParse(f *testing.F) {
	f.Add([]byte("name: demo\nroles:\n  - {name: worker, members: 2, startscript: run.sh}\n"))
	f.Add([]byte("name: demo\nroles:\n  - name: a\n    members: 1\n    startscript: run.sh\n    dependsOn: [b]\n  - {name: b, members: 1, startscript: run.sh, dependsOn: [a]}\n"))
	f.Add([]byte("name: [\n"))
	f.Add([]byte("{name: x, roles: [{name: w, cardinality: '2+', members: 1, startscript: s, env: {A: b}, placement: {hosts: {zone: a}}}]}"))
	f.Add([]byte("&a [*a]"))
	script := func(string) ([]byte, error) { return []byte("#!/bin/sh\nexit 0\n"), nil }
	f.Fuzz(func(t *testing.T, data []byte) {
		c, err := Parse(data, "fuzz.yaml", script)
		if err != nil {
			if !apperr.Is(err, apperr.Invalid) || err.Error() == "" {
				t.Fatalf("a refusal should be an invalid-input error that says why: %#v", err)
			}
			return
		}
		if CheckName(c.Name) != nil || len(c.Roles) == 0 {
			t.Fatalf("accepted a spec without a valid name or roles: %+v", c)
		}
	})
}
