package starter

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/clusterflow/clusterflow/internal/apperr"
	"github.com/clusterflow/clusterflow/spec"
	"github.com/clusterflow/clusterflow/workflows"
)

// EnvChange sets one variable of a role's env to Value, or with Remove takes it out.
type EnvChange struct {
	Name, Value string
	Remove      bool
}

// EditedSpec is the cluster's desired spec with a change made to it, and the hash of the
// desired spec it was made from: ApplyEdited applies it only while that is still the
// desired spec.
type EditedSpec struct {
	Spec spec.Cluster
	From string
}

// DesiredSpec returns the cluster's desired spec and its hash.
func (s *Starter) DesiredSpec(ctx context.Context, name string) (workflows.DesiredSpec, error) {
	var desired workflows.DesiredSpec
	err := s.queryCluster(ctx, name, workflows.SpecQuery, "read the spec of "+name, &desired)
	return desired, err
}

// EditEnv is the cluster's desired spec with the env of role changed as told, in order. It
// refuses, naming the field, a role the cluster lacks, an invalid or reserved name, and
// the removal of a variable the role does not set. The edited spec carries no signature:
// ApplyEdited signs it when the Starter signs.
func (s *Starter) EditEnv(ctx context.Context, name, role string, changes []EnvChange) (EditedSpec, error) {
	desired, err := s.DesiredSpec(ctx, name)
	if err != nil {
		return EditedSpec{}, err
	}
	c := desired.Spec
	i := slices.IndexFunc(c.Roles, func(r spec.Role) bool { return r.Name == role })
	if i < 0 {
		names := make([]string, len(c.Roles))
		for j, r := range c.Roles {
			names[j] = r.Name
		}
		return EditedSpec{}, apperr.Errorf(apperr.Invalid, "role %q: cluster %s has no such role (its roles: %s)", role, name, strings.Join(names, ", "))
	}
	c.Roles = slices.Clone(c.Roles)
	env := maps.Clone(c.Roles[i].Env)
	if env == nil {
		env = map[string]string{}
	}
	var problems []string
	for _, change := range changes {
		field := fmt.Sprintf("roles[%s].env.%s", role, change.Name)
		switch {
		case spec.CheckEnvName(change.Name) != nil:
			problems = append(problems, fmt.Sprintf("%s: %v", field, spec.CheckEnvName(change.Name)))
		case change.Remove:
			if _, ok := env[change.Name]; !ok {
				problems = append(problems, fmt.Sprintf("%s: the role does not set it, so it cannot be removed", field))
			}
			delete(env, change.Name)
		case strings.ContainsRune(change.Value, 0):
			problems = append(problems, fmt.Sprintf("%s: contains a NUL byte", field))
		default:
			env[change.Name] = change.Value
		}
	}
	if len(problems) > 0 {
		return EditedSpec{}, apperr.Errorf(apperr.Invalid, "%s", strings.Join(problems, "; "))
	}
	c.Roles[i].Env = env
	if len(env) == 0 {
		c.Roles[i].Env = nil
	}
	c.Signature = nil
	return EditedSpec{Spec: c, From: desired.Hash}, nil
}

// ApplyEdited applies an edited spec, refused (apperr.Conflict) if the desired spec changed
// after it was read; with no From, whatever the desired spec is (Apply).
func (s *Starter) ApplyEdited(ctx context.Context, e EditedSpec) (workflows.ChangeResult, error) {
	var res workflows.ChangeResult
	c, err := s.sign(ctx, e.Spec, false)
	if err != nil {
		return res, err
	}
	err = s.update(ctx, c.Name, workflows.ApplyUpdate, &res, workflows.ApplyRequest{Spec: c, By: ClientIdentity(), IfSpec: e.From})
	return res, err
}
