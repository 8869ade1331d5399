package hosts

import (
	"fmt"
	"slices"

	"github.com/clusterflow/clusterflow/internal/backend"
	"github.com/clusterflow/clusterflow/internal/gzjson"
	"github.com/clusterflow/clusterflow/spec"
)

// A cluster spread over thousands of hosts, a member each, wrote its whole configmeta to
// every host: members x hosts records in its history at each write, past Temporal's 50 MB
// a run at a few hundred hosts. Its writes now name the configmeta by hash, and each host
// fetches it from the cluster's workflow with the ConfigMetaQuery (change.ConfigMetaByQuery).

// ConfigMetas are the configmetas a cluster is writing, gzipped, by the hash of their
// JSON: the last few, since a host fetches the one its write names, which a newer write
// may follow while the first is in flight. They live in the workflow's memory: a replay
// makes the same writes, and fills them again.
type ConfigMetas struct {
	kept []packedConfigMeta
}

type packedConfigMeta struct {
	hash   string
	packed []byte
}

// configMetasKept is how many configmetas the query answers for.
const configMetasKept = 4

// Files are files for the cluster's folder that name meta for hosts to fetch from the
// workflow, which the query serves from then on.
func (c *ConfigMetas) Files(folder backend.ClusterRef, workflowID string, meta backend.ConfigMeta) (backend.ClusterFiles, error) {
	data, packed, err := gzjson.Pack(meta)
	if err != nil {
		return backend.ClusterFiles{}, err
	}
	hash := spec.ContentHash(data)
	if !slices.ContainsFunc(c.kept, func(k packedConfigMeta) bool { return k.hash == hash }) {
		c.kept = append(c.kept, packedConfigMeta{hash, packed})
		if len(c.kept) > configMetasKept {
			c.kept = c.kept[1:]
		}
	}
	return backend.ClusterFiles{Cluster: folder.Name, Home: folder.Home, ConfigMetaFrom: &backend.ConfigMetaSource{WorkflowID: workflowID, Hash: hash}}, nil
}

// Query answers the ConfigMetaQuery.
func (c *ConfigMetas) Query(hash string) ([]byte, error) {
	for _, k := range c.kept {
		if k.hash == hash {
			return k.packed, nil
		}
	}
	return nil, fmt.Errorf("configmeta %s is no longer written: a newer one is", hash)
}
