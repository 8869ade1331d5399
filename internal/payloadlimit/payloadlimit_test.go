package payloadlimit

import (
	"strings"
	"testing"

	"go.temporal.io/sdk/converter"
)

func TestConverterRefusesAPayloadPastTheLimit(t *testing.T) {
	c := Converter(converter.GetDefaultDataConverter(), 1024)
	if _, err := c.ToPayload(strings.Repeat("x", 900)); err != nil {
		t.Errorf("a payload under the limit was refused: %v", err)
	}
	_, err := c.ToPayload(strings.Repeat("x", 1100))
	if !IsTooLarge(err) || !strings.Contains(err.Error(), "passes the limit of 1 KiB") {
		t.Errorf("a payload past the limit: %v", err)
	}
	// Arguments count together, as Temporal counts them.
	if _, err := c.ToPayloads(strings.Repeat("x", 600), strings.Repeat("y", 600)); !IsTooLarge(err) {
		t.Errorf("two arguments past the limit together: %v", err)
	}
	// Decoding is the inner converter's.
	p, err := converter.GetDefaultDataConverter().ToPayload(strings.Repeat("z", 5000))
	if err != nil {
		t.Fatal(err)
	}
	var s string
	if err := c.FromPayload(p, &s); err != nil || len(s) != 5000 {
		t.Errorf("decode: %v", err)
	}
}
