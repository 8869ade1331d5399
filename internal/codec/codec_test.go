package codec

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	commonpb "go.temporal.io/api/common/v1"
	"go.temporal.io/sdk/converter"
)

func keysOf(t *testing.T, ids ...string) (*Keys, []string) {
	t.Helper()
	var lines []string
	for _, id := range ids {
		line, err := NewKeyLine(id)
		if err != nil {
			t.Fatal(err)
		}
		lines = append(lines, line)
	}
	keys, err := ParseKeys([]byte(strings.Join(lines, "\n")))
	if err != nil {
		t.Fatal(err)
	}
	return keys, lines
}

func parse(t *testing.T, lines ...string) *Keys {
	t.Helper()
	keys, err := ParseKeys([]byte(strings.Join(lines, "\n")))
	if err != nil {
		t.Fatal(err)
	}
	return keys
}

const secret = "hunter2-secret-value"

func TestEncryptedPayloadsHideTheValueAndReadBack(t *testing.T) {
	keys, _ := keysOf(t, "a")
	dc, _ := Converters(nil, keys)
	p, err := dc.ToPayload(map[string]string{"DB_PASSWORD": secret})
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(p.Data, []byte(secret)) || string(p.Metadata[converter.MetadataEncoding]) != Encoding || string(p.Metadata[MetadataKeyID]) != "a" {
		t.Fatalf("payload not encrypted under key a: %v", p)
	}
	var back map[string]string
	if err := dc.FromPayload(p, &back); err != nil || back["DB_PASSWORD"] != secret {
		t.Fatalf("read back %v, %v", back, err)
	}
	// The same value encrypts differently each time (a fresh nonce).
	q, _ := dc.ToPayload(map[string]string{"DB_PASSWORD": secret})
	if bytes.Equal(p.Data, q.Data) {
		t.Error("two encryptions of one value are the same bytes")
	}
}

// Key rotation: a file with B first and A second reads what A wrote, and writes under B.
func TestKeysRotateNewFirstOldStillDecrypts(t *testing.T) {
	_, a := keysOf(t, "a")
	_, b := keysOf(t, "b")
	old, _ := Converters(nil, parse(t, a[0]))
	rotated, _ := Converters(nil, parse(t, b[0], a[0]))
	p, err := old.ToPayload("written under a")
	if err != nil {
		t.Fatal(err)
	}
	var s string
	if err := rotated.FromPayload(p, &s); err != nil || s != "written under a" {
		t.Fatalf("rotated keys read %q, %v", s, err)
	}
	q, _ := rotated.ToPayload("written under b")
	if id := string(q.Metadata[MetadataKeyID]); id != "b" {
		t.Errorf("new payloads carry key %q, want b", id)
	}
	// Without A, what A wrote is refused by name.
	onlyB, _ := Converters(nil, parse(t, b[0]))
	err = onlyB.FromPayload(p, &s)
	if !errors.Is(err, ErrNoKey) || !strings.Contains(err.Error(), `"a"`) {
		t.Errorf("reading a's payload with b only: %v", err)
	}
}

func TestWithoutAKeyEncryptedPayloadsAreAClearErrorAndPlainOnesRead(t *testing.T) {
	keys, _ := keysOf(t, "prod-1")
	withKey, _ := Converters(nil, keys)
	none, _ := Converters(nil, nil)
	p, _ := withKey.ToPayload("x")
	var s string
	err := none.FromPayload(p, &s)
	if !errors.Is(err, ErrNoKey) || !strings.Contains(err.Error(), "--codec-key-file") || !strings.Contains(err.Error(), "prod-1") {
		t.Errorf("no key: %v", err)
	}
	// A payload written before the codec reads with it: histories from before still read.
	plain, _ := none.ToPayload("before the codec")
	if string(plain.Metadata[converter.MetadataEncoding]) == Encoding {
		t.Fatal("a converter without keys encrypted")
	}
	if err := withKey.FromPayload(plain, &s); err != nil || s != "before the codec" {
		t.Errorf("plain payload through the codec: %q, %v", s, err)
	}
}

// In workflow code (the SDK asks for the converter of a workflow context), a payload with
// no key panics, which fails the workflow task instead of the workflow; elsewhere it stays
// an error, and a payload that decodes reads as it does outside.
func TestWithoutAKeyWorkflowCodeFailsItsTaskNotTheWorkflow(t *testing.T) {
	keys, _ := keysOf(t, "prod-1")
	withKey, _ := Converters(nil, keys)
	none, _ := Converters(nil, nil)
	p, _ := withKey.ToPayload("x")
	inWorkflow := func(dc converter.DataConverter) converter.DataConverter {
		aware, ok := dc.(converter.ContextAware)
		if !ok {
			t.Fatalf("the codec's converter %T does not take the workflow's context", dc)
		}
		return aware.WithWorkflowContext(nil)
	}
	var s string
	func() {
		defer func() {
			err, _ := recover().(error)
			if !errors.Is(err, ErrNoKey) || !strings.Contains(err.Error(), "waits for a worker with the key") {
				t.Errorf("no key in workflow code: recovered %v, want a panic wrapping ErrNoKey", err)
			}
		}()
		_ = inWorkflow(none).FromPayloads(&commonpb.Payloads{Payloads: []*commonpb.Payload{p}}, &s)
	}()
	if err := none.FromPayload(p, &s); !errors.Is(err, ErrNoKey) {
		t.Errorf("no key outside workflow code: %v, want ErrNoKey returned", err)
	}
	if err := inWorkflow(withKey).FromPayload(p, &s); err != nil || s != "x" {
		t.Errorf("with the key in workflow code: %q, %v", s, err)
	}
}

func TestAnAlteredPayloadOrKeyIDIsRefused(t *testing.T) {
	_, lines := keysOf(t, "a", "b")
	keys := parse(t, lines...)
	c := New(keys)
	enc, err := c.Encode([]*commonpb.Payload{{Data: []byte(secret)}})
	if err != nil {
		t.Fatal(err)
	}
	flipped := &commonpb.Payload{Metadata: enc[0].Metadata, Data: bytes.Clone(enc[0].Data)}
	flipped.Data[len(flipped.Data)-1] ^= 1
	if _, err := c.Decode([]*commonpb.Payload{flipped}); err == nil {
		t.Error("an altered payload decrypted")
	}
	// The key ID is authenticated: relabelled to b, a's payload does not open.
	relabelled := &commonpb.Payload{Metadata: map[string][]byte{converter.MetadataEncoding: []byte(Encoding), MetadataKeyID: []byte("b")}, Data: enc[0].Data}
	if _, err := c.Decode([]*commonpb.Payload{relabelled}); err == nil {
		t.Error("a payload relabelled with another key ID decrypted")
	}
}

func TestKeyFilesAreCheckedLineByLine(t *testing.T) {
	good, _ := NewKeyLine("k1")
	for _, tc := range []struct{ file, want string }{
		{"", "no keys in it"},
		{"# only a comment\n", "no keys in it"},
		{"k1\n", "line 1: want ID BASE64, got 1 fields"},
		{"k/1 " + strings.Fields(good)[1], `key ID "k/1"`},
		{"k1 c2hvcnQ=", "32 random bytes"},
		{good + "\n" + good, `line 2: key ID "k1" is used twice`},
	} {
		if _, err := ParseKeys([]byte(tc.file)); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: got %v, want %q", tc.file, err, tc.want)
		}
	}
	dir := t.TempDir()
	path := filepath.Join(dir, "keys")
	if err := os.WriteFile(path, []byte(good+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := LoadKeys(path); err == nil || !strings.Contains(err.Error(), "chmod 600") {
		t.Errorf("a world-readable key file: %v", err)
	}
	os.Chmod(path, 0o600)
	if keys, err := LoadKeys(path); err != nil || keys.EncryptingID() != "k1" {
		t.Errorf("an owner-only key file: %v", err)
	}
	if _, err := NewKeyLine("bad id"); err == nil {
		t.Error("a key ID with a space was made")
	}
}
