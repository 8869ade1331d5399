package workflows

import (
	"bytes"
	"compress/gzip"
	"encoding/json"
	"io"
)

// carryInlineUpTo is the largest carried state that travels as plain JSON, readable in the
// Web UI's input of the next run. Past it (a cluster of thousands of members) it is
// gzipped: member records repeat themselves, so 10,000 of them shrink from about 2 MiB,
// Temporal's payload limit, to about a tenth.
const carryInlineUpTo = 256 << 10

// carry puts the state for the next run into the input, gzipped when large. Compressing
// is deterministic, and continue-as-new input is not compared on replay anyway.
func (in *ClusterInput) carry(c Carried) error {
	data, err := json.Marshal(c)
	if err != nil {
		return err
	}
	if len(data) <= carryInlineUpTo {
		in.Carried = &c
		return nil
	}
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	if _, err := zw.Write(data); err != nil {
		return err
	}
	if err := zw.Close(); err != nil {
		return err
	}
	in.CarriedGzip = buf.Bytes()
	return nil
}

// carried is the state a previous run handed over, if any.
func (in ClusterInput) carried() (*Carried, error) {
	if len(in.CarriedGzip) == 0 {
		return in.Carried, nil
	}
	zr, err := gzip.NewReader(bytes.NewReader(in.CarriedGzip))
	if err != nil {
		return nil, err
	}
	data, err := io.ReadAll(zr)
	if err != nil {
		return nil, err
	}
	var c Carried
	if err := json.Unmarshal(data, &c); err != nil {
		return nil, err
	}
	return &c, nil
}
