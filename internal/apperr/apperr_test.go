package apperr

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"testing"
)

// One row per code: the exit status and the HTTP status it maps to, in one place.
func TestEveryCodeMapsToAnExitAndAnHTTPStatus(t *testing.T) {
	want := map[Code][2]int{
		Invalid:     {ExitBadInput, http.StatusBadRequest},
		NotFound:    {ExitBadInput, http.StatusNotFound},
		Conflict:    {ExitBadInput, http.StatusConflict},
		Gone:        {ExitBadInput, http.StatusGone},
		Unavailable: {ExitFailed, http.StatusServiceUnavailable},
		Maintenance: {ExitBadInput, http.StatusServiceUnavailable},
		Failed:      {ExitFailed, http.StatusInternalServerError},
		Internal:    {ExitFailed, http.StatusInternalServerError},

		Unauthenticated:  {ExitBadInput, http.StatusUnauthorized},
		Forbidden:        {ExitBadInput, http.StatusForbidden},
		TooLarge:         {ExitBadInput, http.StatusRequestEntityTooLarge},
		UnsupportedMedia: {ExitBadInput, http.StatusUnsupportedMediaType},
		RateLimited:      {ExitFailed, http.StatusTooManyRequests},
	}
	if len(want) != len(Codes) {
		t.Fatalf("%d codes, %d rows", len(Codes), len(want))
	}
	for _, code := range Codes {
		err := fmt.Errorf("context: %w", Errorf(code, "a %s problem", code))
		if got := [2]int{ExitCode(err), HTTPStatus(err)}; got != want[code] {
			t.Errorf("%s: exit and HTTP %v, want %v", code, got, want[code])
		}
		if c, ok := Known(string(code)); !ok || c != code {
			t.Errorf("Known(%q) = %q, %v", code, c, ok)
		}
	}
	if ExitCode(nil) != ExitOK || HTTPStatus(nil) != http.StatusOK || CodeOf(nil) != "" {
		t.Error("nil is not an error")
	}
	if plain := errors.New("boom"); CodeOf(plain) != Internal || ExitCode(plain) != ExitFailed {
		t.Error("an error without a code is internal")
	}
}

func TestErrorfKeepsTheCauseAndTheMessage(t *testing.T) {
	err := Errorf(Unavailable, "no worker answered: %w", io.EOF)
	if err.Error() != "no worker answered: EOF" || !errors.Is(err, io.EOF) || !Is(err, Unavailable) {
		t.Errorf("%v: cause or code lost", err)
	}
	if wrapped := Wrap(Invalid, io.EOF); wrapped.Error() != "EOF" || !errors.Is(wrapped, io.EOF) || !Is(wrapped, Invalid) {
		t.Errorf("Wrap: %v", wrapped)
	}
	if Wrap(Invalid, nil) != nil {
		t.Error("Wrap(nil) is not nil")
	}
}
