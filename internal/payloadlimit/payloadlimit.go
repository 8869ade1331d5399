// Package payloadlimit turns a payload Temporal would refuse into an error where it is
// made. Temporal refuses a payload over 2 MiB only once the workflow task that carries it
// completes: the task then fails and is retried for ever, and the workflow is wedged. Encoded
// through this converter, the same payload fails the call that made it (a child start, a
// signal, an update's result, an activity through the workflows' guarded helper), which the
// workflow reports as the failure of its operation.
//
// clusterflow bounds its payloads by construction (see the sizes in spec); this is
// the net under that, so that a bound missed fails loudly.
package payloadlimit

import (
	"context"
	"errors"
	"fmt"

	commonpb "go.temporal.io/api/common/v1"
	"go.temporal.io/sdk/converter"
)

// Default is the largest payload clusterflow sends: Temporal's default limit, 2 MiB, less
// room for what the server adds around it.
const Default = 2<<20 - 64<<10

// TooLargeError is a payload past the limit.
type TooLargeError struct {
	Size, Limit int
}

func (e *TooLargeError) Error() string {
	return fmt.Sprintf("payload of %s passes the limit of %s (Temporal refuses payloads over 2 MiB)", kib(e.Size), kib(e.Limit))
}

func kib(n int) string { return fmt.Sprintf("%d KiB", (n+1023)>>10) }

// IsTooLarge reports whether err is, or wraps, a TooLargeError.
func IsTooLarge(err error) bool {
	var tooLarge *TooLargeError
	return errors.As(err, &tooLarge)
}

// Converter wraps a data converter so that encoding a payload larger than limit fails.
func Converter(inner converter.DataConverter, limit int) converter.DataConverter {
	return guard{DataConverter: inner, limit: limit}
}

// New is the converter every clusterflow client uses: the SDK's default, guarded.
func New() converter.DataConverter {
	return Converter(converter.GetDefaultDataConverter(), Default)
}

// Wrap guards a client's configured converter (one with a remote codec, say), or the
// default when none is configured.
func Wrap(inner converter.DataConverter) converter.DataConverter {
	if inner == nil {
		return New()
	}
	return Converter(inner, Default)
}

// Unguarded is the converter under the guard: for what is not sent to Temporal, such as
// an export file.
func Unguarded(dc converter.DataConverter) converter.DataConverter {
	if g, ok := dc.(guard); ok {
		return g.DataConverter
	}
	return dc
}

type guard struct {
	converter.DataConverter
	limit int
}

// WithWorkflowContext implements converter.ContextAware, passing the context on to the
// converter it guards (the codec's fails a workflow task on a payload it has no key for).
func (g guard) WithWorkflowContext(ctx converter.WorkflowContext) converter.DataConverter {
	if aware, ok := g.DataConverter.(converter.ContextAware); ok {
		return guard{DataConverter: aware.WithWorkflowContext(ctx), limit: g.limit}
	}
	return g
}

// WithContext implements converter.ContextAware.
func (g guard) WithContext(ctx context.Context) converter.DataConverter {
	if aware, ok := g.DataConverter.(converter.ContextAware); ok {
		return guard{DataConverter: aware.WithContext(ctx), limit: g.limit}
	}
	return g
}

func (g guard) ToPayload(value any) (*commonpb.Payload, error) {
	p, err := g.DataConverter.ToPayload(value)
	if err == nil && p.Size() > g.limit {
		return nil, &TooLargeError{Size: p.Size(), Limit: g.limit}
	}
	return p, err
}

func (g guard) ToPayloads(values ...any) (*commonpb.Payloads, error) {
	p, err := g.DataConverter.ToPayloads(values...)
	if err == nil && p.Size() > g.limit {
		return nil, &TooLargeError{Size: p.Size(), Limit: g.limit}
	}
	return p, err
}
