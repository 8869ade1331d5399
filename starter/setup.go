package starter

import (
	"context"
	"fmt"

	"go.temporal.io/api/enums/v1"
	"go.temporal.io/api/operatorservice/v1"

	"github.com/clusterflow/clusterflow/workflows"
)

// SetupResult says what Setup did.
type SetupResult struct {
	Added   []string `json:"added"`
	Present []string `json:"present"`
}

// Setup registers clusterflow's custom search attributes in the namespace, adding only the
// missing ones, so it is safe to run again.
func (s *Starter) Setup(ctx context.Context, namespace string) (SetupResult, error) {
	var res SetupResult
	missing, err := s.MissingSearchAttributes(ctx, namespace)
	if err != nil {
		return res, err
	}
	toAdd := map[string]enums.IndexedValueType{}
	for _, key := range workflows.SearchAttributes {
		if _, isMissing := missing[key.GetName()]; isMissing {
			toAdd[key.GetName()] = missing[key.GetName()]
			res.Added = append(res.Added, key.GetName())
		} else {
			res.Present = append(res.Present, key.GetName())
		}
	}
	if len(toAdd) == 0 {
		return res, nil
	}
	_, err = s.client.OperatorService().AddSearchAttributes(ctx, &operatorservice.AddSearchAttributesRequest{
		Namespace: namespace, SearchAttributes: toAdd,
	})
	if err != nil {
		return res, fmt.Errorf("register search attributes %v in namespace %q: %w", res.Added, namespace, err)
	}
	return res, nil
}

// MissingSearchAttributes returns the custom search attributes clusterflow needs that the
// namespace lacks, with the type each must have.
func (s *Starter) MissingSearchAttributes(ctx context.Context, namespace string) (map[string]enums.IndexedValueType, error) {
	resp, err := s.client.OperatorService().ListSearchAttributes(ctx, &operatorservice.ListSearchAttributesRequest{Namespace: namespace})
	if err != nil {
		return nil, fmt.Errorf("list search attributes of namespace %q: %w", namespace, err)
	}
	missing := map[string]enums.IndexedValueType{}
	for _, key := range workflows.SearchAttributes {
		if _, ok := resp.GetCustomAttributes()[key.GetName()]; !ok {
			missing[key.GetName()] = key.GetValueType()
		}
	}
	return missing, nil
}
