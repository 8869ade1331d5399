package e2e

import (
	"context"
	"fmt"
	"os"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"
)

// browserLog keeps what a browser tab asked for and what its scripts threw, so that a step
// that fails can say why its page stayed blank: which requests never finished, which
// failed or were answered with an error, and which exceptions stopped the app.
type browserLog struct {
	mu       sync.Mutex
	pending  map[network.RequestID]pendingRequest
	problems []string
	// lastNetwork is when a request of the tab last started, answered or ended.
	lastNetwork time.Time
}

type pendingRequest struct {
	method, url string
	since       time.Time
}

// problemsKept bounds what a failure prints: the last of them tell most.
const problemsKept = 20

type browserLogKey struct{}

// recordBrowser starts recording the tab of ctx, and keeps the record in the returned
// context, where summarizeBrowser finds it.
func recordBrowser(ctx context.Context) (context.Context, error) {
	l := &browserLog{pending: map[network.RequestID]pendingRequest{}}
	// The listener runs in the tab's reading loop: it only records, under the lock.
	err := chromedp.Listen(ctx, func(ev any) {
		l.mu.Lock()
		defer l.mu.Unlock()
		switch ev.(type) {
		case *network.EventRequestWillBeSent, *network.EventResponseReceived, *network.EventLoadingFinished, *network.EventLoadingFailed:
			l.lastNetwork = time.Now()
		}
		switch e := ev.(type) {
		case *network.EventRequestWillBeSent:
			l.pending[e.RequestID] = pendingRequest{method: e.Request.Method, url: shortURL(e.Request.URL), since: time.Now()}
		case *network.EventResponseReceived:
			if r, ok := l.pending[e.RequestID]; ok && e.Response.Status >= 400 {
				l.add(fmt.Sprintf("%s %s answered %d", r.method, r.url, e.Response.Status))
			}
		case *network.EventLoadingFinished:
			delete(l.pending, e.RequestID)
		case *network.EventLoadingFailed:
			if r, ok := l.pending[e.RequestID]; ok {
				l.add(fmt.Sprintf("%s %s failed: %s", r.method, r.url, e.ErrorText))
			}
			delete(l.pending, e.RequestID)
		case *runtime.EventExceptionThrown:
			d := e.ExceptionDetails
			text := d.Text
			if d.Exception != nil && d.Exception.Description != "" {
				text += " " + strings.SplitN(d.Exception.Description, "\n", 2)[0]
			}
			l.add("exception: " + text)
		case *runtime.EventConsoleAPICalled:
			if e.Type == runtime.ConsoleAPICalledTypeError {
				var args []string
				for _, a := range e.Args {
					if a.Description != "" {
						args = append(args, strings.SplitN(a.Description, "\n", 2)[0])
					} else {
						args = append(args, strings.Trim(string(a.Value), `"`))
					}
				}
				l.add("console error: " + strings.Join(args, " "))
			}
		}
	})
	if err != nil {
		return ctx, err
	}
	return context.WithValue(ctx, browserLogKey{}, l), nil
}

func (l *browserLog) add(problem string) {
	l.problems = append(l.problems, time.Now().Format("15:04:05.0")+" "+problem)
	if len(l.problems) > problemsKept {
		l.problems = l.problems[len(l.problems)-problemsKept:]
	}
}

// networkQuietFor is how long the tab of ctx has neither started nor ended a request: a
// page that stays blank while its requests come and go is loading slowly, not stuck.
func networkQuietFor(ctx context.Context) time.Duration {
	l, ok := ctx.Value(browserLogKey{}).(*browserLog)
	if !ok {
		return time.Duration(1<<63 - 1)
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	return time.Since(l.lastNetwork)
}

// summarizeBrowser says on one line (a CI excerpt keeps only the first line of each
// message) what the tab of ctx was still waiting for and what went wrong in it.
func summarizeBrowser(ctx context.Context) string {
	l, ok := ctx.Value(browserLogKey{}).(*browserLog)
	if !ok {
		return "browser: not recorded"
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	var waiting []string
	for _, r := range l.pending {
		waiting = append(waiting, fmt.Sprintf("%s %s for %s", r.method, r.url, time.Since(r.since).Round(100*time.Millisecond)))
	}
	sort.Strings(waiting)
	return fmt.Sprintf("browser: still waiting for [%s]; went wrong: [%s]", strings.Join(waiting, "; "), strings.Join(l.problems, "; "))
}

// shortURL drops the scheme, which every request of a test shares; the port tells the UI
// from the codec server.
func shortURL(u string) string {
	_, rest, found := strings.Cut(u, "://")
	if !found {
		return u
	}
	return rest
}

// logUIFailuresAtEnd logs, when t fails, on one line, what dev's log (logFile) says the Web
// UI failed to answer: the server's side of a page that stayed blank or broken.
func logUIFailuresAtEnd(t *testing.T, logFile string) {
	t.Cleanup(func() {
		if !t.Failed() {
			return
		}
		data, _ := os.ReadFile(logFile)
		var failures []string
		for line := range strings.Lines(string(data)) {
			if strings.Contains(line, "Web UI") {
				failures = append(failures, strings.Join(strings.Fields(line), " "))
			}
		}
		t.Logf("the Web UI's failures in dev's log (%d): %s", len(failures), strings.Join(failures[max(0, len(failures)-10):], " | "))
	})
}
