// Package gzjson packs large JSON values into gzip, for payloads that would otherwise pass
// Temporal's size limits: thousands of member records repeat themselves and shrink about
// tenfold. Packing is deterministic, so workflow code may use it.
package gzjson

import (
	"bytes"
	"compress/gzip"
	"encoding/json"
	"io"
)

// Marshal returns v as gzipped JSON.
func Marshal(v any) ([]byte, error) {
	data, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	return Pack(data)
}

// Pack gzips JSON already marshalled.
func Pack(data []byte) ([]byte, error) {
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

// Unmarshal reads gzipped JSON into v.
func Unmarshal(packed []byte, v any) error {
	zr, err := gzip.NewReader(bytes.NewReader(packed))
	if err != nil {
		return err
	}
	data, err := io.ReadAll(zr)
	if err != nil {
		return err
	}
	return json.Unmarshal(data, v)
}
