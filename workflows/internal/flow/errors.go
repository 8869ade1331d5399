package flow

import (
	"errors"
	"fmt"

	"go.temporal.io/sdk/temporal"

	"github.com/clusterflow/clusterflow/internal/apperr"
	"github.com/clusterflow/clusterflow/internal/backend"
	"github.com/clusterflow/clusterflow/workflows"
)

// RootCause unwraps Temporal's activity and child-workflow wrappers down to what failed.
func RootCause(err error) error {
	for {
		next := errors.Unwrap(err)
		if next == nil {
			return err
		}
		err = next
	}
}

func IsCanceled(err error) bool {
	var canceled *temporal.CanceledError
	return errors.As(err, &canceled)
}

// HasErrorType says err is an application error of that type.
func HasErrorType(err error, errType string) bool {
	var appErr *temporal.ApplicationError
	return errors.As(err, &appErr) && appErr.Type() == errType
}

// RefusedBeforeLaunch says a run failed before its script started: its host refused it
// (the cluster, namespace or env, an unsigned spec) or could not fill in a secret.
func RefusedBeforeLaunch(err error) bool {
	return HasErrorType(err, backend.ErrHostRefused) || HasErrorType(err, backend.ErrSecretUnavailable)
}

// ScriptTails returns the output tails carried by a failed script's error, if any.
func ScriptTails(err error) (stdout, stderr string) {
	var appErr *temporal.ApplicationError
	if !errors.As(err, &appErr) || !appErr.HasDetails() {
		return "", ""
	}
	var res backend.ScriptResult
	if appErr.Details(&res) != nil {
		return "", ""
	}
	return res.StdoutTail, res.StderrTail
}
func ErrorMessage(err error) string {
	return RootCause(err).Error()
}

// Refused is a validator's refusal of an update: nothing was written to the history and
// nothing changed. Its type is the apperr code (see RefusalError in api.go).
func Refused(code apperr.Code, format string, args ...any) error {
	return temporal.NewNonRetryableApplicationError(fmt.Sprintf(format, args...), string(code), nil)
}

// RefusedInMaintenance is a validator's refusal of what to do while maintenance is on.
func RefusedInMaintenance(m workflows.Maintenance, what string) error {
	return Refused(apperr.Maintenance, "%s", m.Refusal(what).Error())
}

// RefusalNames is how many names a refusal lists before it counts the rest.
const RefusalNames = 5
