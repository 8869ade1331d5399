package workflows

import (
	"github.com/clusterflow/clusterflow/internal/gzjson"
)

// carry puts the state for the next run into the input: as plain JSON, readable in the Web
// UI, or gzipped for a cluster of thousands of members, whose records are about 2 MiB of
// JSON at 10,000, Temporal's payload limit. Continue-as-new input is not compared on
// replay, and packing is deterministic anyway.
func (in *ClusterInput) carry(c Carried) error {
	packed, err := gzjson.PackIfLarge(c)
	if err != nil {
		return err
	}
	if packed == nil {
		in.Carried = &c
	}
	in.CarriedGzip = packed
	return nil
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
