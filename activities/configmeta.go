package activities

import (
	"context"
	"fmt"
	"sync"
	"time"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/temporal"
	"golang.org/x/sync/singleflight"

	"github.com/clusterflow/clusterflow/internal/backend"
	"github.com/clusterflow/clusterflow/internal/gzjson"
	"github.com/clusterflow/clusterflow/spec"
	"github.com/clusterflow/clusterflow/workflows"
)

// fetchConfigMeta asks the cluster's workflow for the configmeta a write names, and checks
// it against its hash. The hosts a process serves share what it fetched, and wait for a
// fetch in flight rather than asking again (one host a process in a fleet; thousands in a
// simulated one, which asked the workflow a thousand times at once).
func fetchConfigMeta(ctx context.Context, from backend.ConfigMetaSource) ([]byte, error) {
	key := from.WorkflowID + "/" + from.Hash
	if packed, ok := fetchedConfigMetas.get(key); ok {
		return packed, nil
	}
	v, err, _ := configMetaFetches.Do(key, func() (any, error) {
		packed, err := queryConfigMeta(ctx, from)
		if err == nil {
			fetchedConfigMetas.put(key, packed)
		}
		return packed, err
	})
	if err != nil {
		return nil, err
	}
	return v.([]byte), nil
}

// configMetaFetches are the fetches in flight, by workflow and hash.
var configMetaFetches singleflight.Group

// configMetaQueryWait bounds one query for a configmeta. A query waits for the workflow's
// task in flight, which takes seconds in a cluster of thousands of members; a query that
// got lost meanwhile held a host's write for its whole wait (minutes) while the deploy
// waited on it. One that takes longer is asked again, until the activity's own deadline.
const configMetaQueryWait = 20 * time.Second

func queryConfigMeta(ctx context.Context, from backend.ConfigMetaSource) ([]byte, error) {
	for {
		queryCtx, cancel := context.WithTimeout(ctx, configMetaQueryWait)
		resp, err := activity.GetClient(ctx).QueryWorkflow(queryCtx, from.WorkflowID, "", workflows.ConfigMetaQuery, from.Hash)
		cancel()
		if err != nil && queryCtx.Err() != nil && ctx.Err() == nil {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("fetch configmeta %s from %s: %w", from.Hash, from.WorkflowID, err)
		}
		var packed []byte
		if err := resp.Get(&packed); err != nil {
			return nil, fmt.Errorf("fetch configmeta %s from %s: %w", from.Hash, from.WorkflowID, err)
		}
		data, err := gzjson.Inflate(packed)
		if err != nil || spec.ContentHash(data) != from.Hash {
			return nil, temporal.NewNonRetryableApplicationError(fmt.Sprintf("configmeta from %s does not match its hash %s", from.WorkflowID, from.Hash), "InvalidInput", nil)
		}
		return packed, nil
	}
}

// fetchedConfigMetas keeps the last few configmetas fetched.
var fetchedConfigMetas = configMetaCache{keep: 8}

type configMetaCache struct {
	mu    sync.Mutex
	keep  int
	order []string
	data  map[string][]byte
}

func (c *configMetaCache) get(key string) ([]byte, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	packed, ok := c.data[key]
	return packed, ok
}

func (c *configMetaCache) put(key string, packed []byte) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.data == nil {
		c.data = map[string][]byte{}
	}
	if _, ok := c.data[key]; ok {
		return
	}
	c.data[key] = packed
	c.order = append(c.order, key)
	if len(c.order) > c.keep {
		delete(c.data, c.order[0])
		c.order = c.order[1:]
	}
}
