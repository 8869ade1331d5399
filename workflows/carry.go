package workflows

import (
	"encoding/json"

	"github.com/clusterflow/clusterflow/internal/gzjson"
)

// packAbove is the size past which state travels gzipped (gzjson) rather than as plain
// JSON, readable in the Web UI: a cluster of thousands of members. 10,000 member records
// are about 2 MiB of JSON, Temporal's payload limit, and about a tenth of that gzipped.
const packAbove = 256 << 10

// carry puts the state for the next run into the input, gzipped when large. Continue-as-
// new input is not compared on replay, and packing is deterministic anyway.
func (in *ClusterInput) carry(c Carried) error {
	data, err := json.Marshal(c)
	if err != nil {
		return err
	}
	if len(data) <= packAbove {
		in.Carried = &c
		return nil
	}
	in.CarriedGzip, err = gzjson.Pack(data)
	return err
}

// carried is the state a previous run handed over, if any.
func (in ClusterInput) carried() (*Carried, error) {
	if len(in.CarriedGzip) == 0 {
		return in.Carried, nil
	}
	var c Carried
	if err := gzjson.Unmarshal(in.CarriedGzip, &c); err != nil {
		return nil, err
	}
	return &c, nil
}
