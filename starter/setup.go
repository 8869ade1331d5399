package starter

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"go.temporal.io/api/enums/v1"
	"go.temporal.io/api/operatorservice/v1"
	"go.temporal.io/api/workflowservice/v1"

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
	return res, s.waitUsable(ctx, namespace, toAdd)
}

// usableWait bounds how long Setup waits for new attributes to be usable.
const usableWait = 30 * time.Second

// waitUsable waits until the server accepts queries on newly registered attributes. A
// server takes them into use at its next namespace cache refresh, and until then refuses
// to start workflows that set them, so a deploy right after setup would fail.
func (s *Starter) waitUsable(ctx context.Context, namespace string, added map[string]enums.IndexedValueType) error {
	var terms []string
	for _, name := range slices.Sorted(maps.Keys(added)) {
		value := `""`
		if added[name] == enums.INDEXED_VALUE_TYPE_INT {
			value = "0"
		}
		terms = append(terms, name+" = "+value)
	}
	query := strings.Join(terms, " AND ")
	deadline := time.Now().Add(usableWait)
	for {
		_, err := s.client.CountWorkflow(ctx, &workflowservice.CountWorkflowExecutionsRequest{Namespace: namespace, Query: query})
		if err == nil {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("search attributes registered in namespace %q, but the server still refuses them after %s: %w", namespace, usableWait, err)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(250 * time.Millisecond):
		}
	}
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

// NamespaceID is the namespace's ID, unique across Temporal servers: a worker marks the
// cluster folders it writes with it, so that hosts shared by several servers or namespaces
// (a migration's source and target) tell whose each folder is.
func (s *Starter) NamespaceID(ctx context.Context, namespace string) (string, error) {
	if namespace == "" {
		namespace = "default"
	}
	resp, err := s.client.WorkflowService().DescribeNamespace(ctx, &workflowservice.DescribeNamespaceRequest{Namespace: namespace})
	if err != nil {
		return "", fmt.Errorf("describe namespace %q: %w", namespace, err)
	}
	return resp.GetNamespaceInfo().GetId(), nil
}
