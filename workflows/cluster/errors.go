package cluster

import (
	"errors"

	"go.temporal.io/sdk/temporal"

	"github.com/clusterflow/clusterflow/internal/backend"
)

// rootCause unwraps Temporal's activity and child-workflow wrappers down to what failed.
func rootCause(err error) error {
	for {
		next := errors.Unwrap(err)
		if next == nil {
			return err
		}
		err = next
	}
}

func isCanceled(err error) bool {
	var canceled *temporal.CanceledError
	return errors.As(err, &canceled)
}

// hasErrorType says err is an application error of that type.
func hasErrorType(err error, errType string) bool {
	var appErr *temporal.ApplicationError
	return errors.As(err, &appErr) && appErr.Type() == errType
}

// refusedBeforeLaunch says a run failed before its script started: its host refused it
// (the cluster, namespace or env, an unsigned spec) or could not fill in a secret.
func refusedBeforeLaunch(err error) bool {
	return hasErrorType(err, backend.ErrHostRefused) || hasErrorType(err, backend.ErrSecretUnavailable)
}

// scriptTails returns the output tails carried by a failed script's error, if any.
func scriptTails(err error) (stdout, stderr string) {
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
func errorMessage(err error) string {
	return rootCause(err).Error()
}
