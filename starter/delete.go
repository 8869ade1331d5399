package starter

import (
	"context"

	"github.com/clusterflow/clusterflow/internal/apperr"
	"github.com/clusterflow/clusterflow/workflows"
)

// Delete asks the cluster to delete itself and returns once the request is accepted.
// Deleting a cluster that is already being deleted, or is deleted, is accepted too.
func (s *Starter) Delete(ctx context.Context, name string) (workflows.ClusterStatus, error) {
	var status workflows.ClusterStatus
	err := s.update(ctx, name, workflows.DeleteUpdate, &status)
	if apperr.Is(err, apperr.Gone) {
		return s.Status(ctx, name)
	}
	return status, err
}
