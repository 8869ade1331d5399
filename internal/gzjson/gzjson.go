// Package gzjson packs large JSON values into gzip, for payloads that would otherwise pass
// Temporal's size limits: thousands of member records repeat themselves and shrink about
// tenfold. Packing is deterministic, so workflow code may use it.
package gzjson

import (
	"bytes"
	"compress/gzip"
	"encoding/json"
	"fmt"
	"io"
)

// PackAbove is the size of JSON past which PackIfLarge packs it. Smaller values travel as
// plain JSON, readable in the Web UI.
const PackAbove = 256 << 10

// PackIfLarge returns v as gzipped JSON when its JSON passes PackAbove, and nil when it
// is small enough to travel as it is.
func PackIfLarge(v any) ([]byte, error) {
	data, err := json.Marshal(v)
	if err != nil || len(data) <= PackAbove {
		return nil, err
	}
	return gz(data)
}

// Pack returns v's JSON and the same gzipped, whatever its size.
func Pack(v any) (data, packed []byte, err error) {
	if data, err = json.Marshal(v); err != nil {
		return nil, nil, err
	}
	packed, err = gz(data)
	return data, packed, err
}

func gz(data []byte) ([]byte, error) {
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	if _, err := zw.Write(data); err != nil {
		return nil, err
	}
	if err := zw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// MaxUnpacked bounds what Unmarshal inflates: a few kilobytes of gzip can hold gigabytes
// of zeros. Nothing clusterflow packs comes near it (50,000 members' records are about
// 20 MiB of JSON).
const MaxUnpacked = 128 << 20

// Unmarshal reads gzipped JSON into v, refusing more than MaxUnpacked of it.
func Unmarshal(packed []byte, v any) error {
	data, err := Inflate(packed)
	if err != nil {
		return err
	}
	return json.Unmarshal(data, v)
}

// Inflate returns the JSON that packed holds, refusing more than MaxUnpacked of it.
func Inflate(packed []byte) ([]byte, error) {
	zr, err := gzip.NewReader(bytes.NewReader(packed))
	if err != nil {
		return nil, err
	}
	data, err := io.ReadAll(io.LimitReader(zr, MaxUnpacked+1))
	if err != nil {
		return nil, err
	}
	if len(data) > MaxUnpacked {
		return nil, fmt.Errorf("unpacks to more than %d MiB", MaxUnpacked>>20)
	}
	return data, nil
}
