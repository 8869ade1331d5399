package codec

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"

	commonpb "go.temporal.io/api/common/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/temporal"
	"google.golang.org/protobuf/proto"

	"github.com/clusterflow/clusterflow/internal/payloadlimit"
)

const (
	// Encoding marks an encrypted payload, as Temporal's samples and tools do.
	Encoding = "binary/encrypted"
	// MetadataKeyID names the key that encrypted a payload.
	MetadataKeyID = "encryption-key-id"
)

// ErrNoKey is a payload that needs a key this process does not have.
var ErrNoKey = errors.New("no key for an encrypted payload")

// Codec encrypts with the first key and decrypts with any. Payloads that are not
// encrypted decode as they are: histories written before the codec was turned on still
// read, so a live cluster carries on when it is.
type Codec struct {
	keys *Keys
}

// New returns the codec of keys; nil keys give a codec that encrypts nothing and refuses,
// with a clear error, to read encrypted payloads: a client that forgot its key file.
func New(keys *Keys) *Codec { return &Codec{keys: keys} }

// Encode encrypts each payload whole, metadata included, under the first key.
func (c *Codec) Encode(payloads []*commonpb.Payload) ([]*commonpb.Payload, error) {
	if c.keys == nil {
		return payloads, nil
	}
	id := c.keys.EncryptingID()
	aead := c.keys.aead[id]
	out := make([]*commonpb.Payload, len(payloads))
	for i, p := range payloads {
		plain, err := proto.Marshal(p)
		if err != nil {
			return nil, err
		}
		sealed := make([]byte, aead.NonceSize(), aead.NonceSize()+len(plain)+aead.Overhead())
		if _, err := rand.Read(sealed); err != nil {
			return nil, err
		}
		// The key ID is authenticated with the data, so it cannot be swapped.
		sealed = aead.Seal(sealed, sealed, plain, []byte(id))
		out[i] = &commonpb.Payload{
			Metadata: map[string][]byte{converter.MetadataEncoding: []byte(Encoding), MetadataKeyID: []byte(id)},
			Data:     sealed,
		}
	}
	return out, nil
}

// Decode decrypts encrypted payloads and passes the others through.
func (c *Codec) Decode(payloads []*commonpb.Payload) ([]*commonpb.Payload, error) {
	out := make([]*commonpb.Payload, len(payloads))
	for i, p := range payloads {
		if string(p.GetMetadata()[converter.MetadataEncoding]) != Encoding {
			out[i] = p
			continue
		}
		id := string(p.GetMetadata()[MetadataKeyID])
		if c.keys == nil {
			return nil, fmt.Errorf("%w: the payload is encrypted with clusterflow codec key %q, and no key file was given (--codec-key-file, or %s)", ErrNoKey, id, KeyFileEnv)
		}
		aead, ok := c.keys.aead[id]
		if !ok {
			return nil, fmt.Errorf("%w: the payload is encrypted with codec key %q, which the key file does not hold (it holds %v)", ErrNoKey, id, c.keys.ids)
		}
		if len(p.Data) < aead.NonceSize() {
			return nil, fmt.Errorf("an encrypted payload of %d bytes is too short to be one", len(p.Data))
		}
		nonce, sealed := p.Data[:aead.NonceSize()], p.Data[aead.NonceSize():]
		plain, err := aead.Open(nil, nonce, sealed, []byte(id))
		if err != nil {
			return nil, fmt.Errorf("a payload encrypted with key %q does not decrypt with it (altered, or another key of that ID): %w", id, err)
		}
		out[i] = &commonpb.Payload{}
		if err := proto.Unmarshal(plain, out[i]); err != nil {
			return nil, fmt.Errorf("a payload decrypted with key %q is not a payload: %w", id, err)
		}
	}
	return out, nil
}

// Converters are what a client is made with: inner (the default, or one with a remote
// codec) with this codec on top, and a failure converter that encodes failure messages and
// stack traces too, since script output lands in them. With nil keys, nothing is
// encrypted, and an encrypted payload read fails with ErrNoKey rather than as garbage.
func Converters(inner converter.DataConverter, keys *Keys) (converter.DataConverter, converter.FailureConverter) {
	if inner == nil {
		inner = converter.GetDefaultDataConverter()
	}
	dc := workflowTaskFailing{converter.NewCodecDataConverter(inner, New(keys))}
	fc := temporal.NewDefaultFailureConverter(temporal.DefaultFailureConverterOptions{
		DataConverter: dc, EncodeCommonAttributes: keys != nil,
	})
	return dc, fc
}

// workflowTaskFailing makes a payload this process has no key for, read in workflow code,
// fail the workflow task rather than the workflow. The SDK fails a workflow whose input it
// cannot decode, so a worker started without --codec-key-file (or with a key file that
// lacks an old key) would end every encrypted cluster's workflow at its next task, while
// its members run on. A panic in workflow code instead fails the task, which the SDK's
// default WorkflowPanicPolicy (BlockWorkflow) leaves to be retried: the workflow waits,
// whole, for a worker that has the key. Clients and activities, outside workflow code, get
// the error as it is.
type workflowTaskFailing struct{ converter.DataConverter }

// WithWorkflowContext implements converter.ContextAware; the SDK calls it for every payload
// it reads in workflow code.
func (w workflowTaskFailing) WithWorkflowContext(ctx converter.WorkflowContext) converter.DataConverter {
	inner := w.DataConverter
	if aware, ok := inner.(converter.ContextAware); ok {
		inner = aware.WithWorkflowContext(ctx)
	}
	return noKeyPanics{inner}
}

// WithContext implements converter.ContextAware.
func (w workflowTaskFailing) WithContext(ctx context.Context) converter.DataConverter {
	if aware, ok := w.DataConverter.(converter.ContextAware); ok {
		return workflowTaskFailing{aware.WithContext(ctx)}
	}
	return w
}

type noKeyPanics struct{ converter.DataConverter }

func (n noKeyPanics) FromPayload(payload *commonpb.Payload, valuePtr any) error {
	return panicOnNoKey(n.DataConverter.FromPayload(payload, valuePtr))
}

func (n noKeyPanics) FromPayloads(payloads *commonpb.Payloads, valuePtrs ...any) error {
	return panicOnNoKey(n.DataConverter.FromPayloads(payloads, valuePtrs...))
}

func panicOnNoKey(err error) error {
	if errors.Is(err, ErrNoKey) {
		panic(fmt.Errorf("this worker cannot read the workflow: %w; the workflow task fails and waits for a worker with the key", err))
	}
	return err
}

// Apply sets a client's converters: the codec of keyFile's keys (none when empty) over the
// converter the options already have (a remote codec's, say), guarded by payloadlimit.
func Apply(co *client.Options, keyFile string) error {
	var keys *Keys
	if keyFile != "" {
		var err error
		if keys, err = LoadKeys(keyFile); err != nil {
			return err
		}
	}
	ApplyKeys(co, keys)
	return nil
}

// ApplyKeys is Apply with keys already read (nil: none).
func ApplyKeys(co *client.Options, keys *Keys) {
	var dc converter.DataConverter
	dc, co.FailureConverter = Converters(co.DataConverter, keys)
	co.DataConverter = payloadlimit.Wrap(dc)
}
