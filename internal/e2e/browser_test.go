package e2e

import (
	"context"
	"crypto/rand"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/clusterflow/clusterflow/internal/testenv"
	"github.com/clusterflow/clusterflow/workflows"
)

// browserRequired makes a missing Chromium fail the browser test rather than skip it;
// .ci/run sets it after installing Chromium.
const browserRequired = "CLUSTERFLOW_BROWSER_REQUIRED"

// TestWebUIShowsClustersInARealBrowser drives the Web UI that `clusterflow dev` serves in
// headless Chromium: the workflow list filtered by the cluster search attributes, and the
// cluster's workflow page with its summary, details and status query. Screenshots of each
// step are kept in a folder named in the log when the test fails.
func TestWebUIShowsClustersInARealBrowser(t *testing.T) {
	t.Parallel()
	guard(t)
	chromium := requireChromium(t)
	example := newExampleDev(t)
	logUIFailuresAtEnd(t, filepath.Join(example.dir, "dev.log"))
	uiAddr := example.uiAddr
	dev := startDev(t, example.dir, "dev-ui", example.args)
	if err := dev.WaitFor("Phase:    ready", 2*time.Minute); err != nil {
		t.Fatal(err)
	}

	shots := screenshotDir(t)
	ctx := newBrowser(t, chromium)
	base := "http://" + uiAddr + "/namespaces/default/workflows"
	list := func(query string) string { return base + "?query=" + url.QueryEscape(query) }

	// The browser is let in by the address dev printed; without it, the UI shows nothing.
	out, _ := os.ReadFile(dev.Stdout)
	step(t, ctx, shots, "refused-without-the-session", open(base, "body", "Open the address"))
	step(t, ctx, shots, "let-in", open(devUILogin(t, string(out), uiAddr), "body", "Workflows"))

	// The list, filtered by the cluster's search attributes, shows it.
	step(t, ctx, shots, "list-filtered",
		open(list(`ClusterName="demo" AND ClusterPhase="ready" AND ClusterRoles="worker" AND ClusterMembers=5`),
			`a[href*="cluster%2Fdemo"]`, "cluster/demo"),
	)
	// A filter that matches nothing leaves it out.
	step(t, ctx, shots, "list-failed",
		open(list(`ClusterName="demo" AND ClusterPhase="failed"`), "body", "No Workflows"),
	)
	links, err := browse(ctx, chromedp.Evaluate[int](`document.querySelectorAll('a[href*="cluster%2Fdemo"]').length`))
	if err != nil || links != 0 {
		t.Errorf("a failed-phase filter listed the ready cluster (%d links, %v)", links, err)
	}
	// Following the link opens the workflow page; its User Metadata tab shows the cluster's
	// summary, details and current details, and its Queries tab offers the status query.
	step(t, ctx, shots, "workflow-page",
		open(list(`ClusterName="demo"`), `a[href*="cluster%2Fdemo"]`, "cluster/demo"),
		chromedp.Click(chromedp.CSS(`a[href*="cluster%2Fdemo"]`)),
		untilShown("h1", "cluster/demo"),
	)
	step(t, ctx, shots, "workflow-metadata",
		clickText("User Metadata"),
		waitText("body", "demo: 3 roles, 5 members (controller → worker → edge)"),
		waitText("body", "examples/registry/cluster.yaml"),
		waitText("body", "members ready"),
		waitText("body", "ready 3"), // the current details' table of roles as they are now
	)
	step(t, ctx, shots, "workflow-queries",
		clickText("Queries"),
		// The tab preselects the first query by name, which is not the status query.
		chooseOption("query-select", "status"),
		clickText("Run Query"),
		waitText("body", `"phase": "ready"`),
	)
}

// stepLimit bounds one browser step: its navigation, clicks and polls together.
const stepLimit = 45 * time.Second

// step runs browser actions under stepLimit, then saves a screenshot of the page named
// after the step, whether the actions succeeded or not. A step that cannot finish fails
// within its limit, with its screenshot and the page's text, instead of hanging.
func step(t *testing.T, ctx context.Context, dir, name string, actions ...chromedp.Action[chromedp.Void]) {
	t.Helper()
	stepCtx, cancel := context.WithTimeout(ctx, stepLimit)
	err := chromedp.Do(stepCtx, actions...)
	cancel()
	if shot, shotErr := browse(ctx, chromedp.FullScreenshot(100)); shotErr == nil {
		_ = os.WriteFile(filepath.Join(dir, name+".png"), shot, 0o644)
	}
	if err != nil {
		text, _ := browse(ctx, chromedp.Text(chromedp.CSS("body")))
		t.Fatalf("%s: %v; %s\npage text:\n%.2000s", name, err, summarizeBrowser(ctx), text)
	}
}

// browse runs one action that returns a value, bounded like a step.
func browse[T any](ctx context.Context, action chromedp.Action[T]) (T, error) {
	ctx, cancel := context.WithTimeout(ctx, stepLimit)
	defer cancel()
	return chromedp.Run(ctx, action)
}

// waitText waits until an element matching selector contains text, in the page or in the
// iframes the UI renders Markdown (summaries and details) into.
func waitText(selector, text string) chromedp.Action[chromedp.Void] {
	return poll(fmt.Sprintf(`[document, ...[...document.querySelectorAll("iframe")].map(f => f.contentDocument)]
		.filter(d => d).some(d => [...d.querySelectorAll(%q)].some(e => e.innerText.includes(%q)))`, selector, text))
}

// open navigates to u and waits until an element matching selector contains text
// (untilShown).
func open(u, selector, text string) chromedp.Action[chromedp.Void] {
	return func(ctx context.Context, target *chromedp.Target) (chromedp.Void, error) {
		if _, err := chromedp.Navigate(u)(ctx, target); err != nil {
			return chromedp.Void{}, err
		}
		return untilShown(selector, text)(ctx, target)
	}
}

// untilShown waits, like waitText, until an element matching selector contains text. The
// UI answers some page loads on a busy machine with its error page ("Uh oh. There's an
// error."), which it never retries by itself, so untilShown reloads such a page, as a user
// would, after two seconds, until the step's deadline: after a navigation, and after a
// click that opens a page. A blank page is reloaded only once its requests have stopped
// for five seconds: a busy machine takes long to load the UI's hundreds of scripts, and a
// reload while they come in starts them all again.
func untilShown(selector, text string) chromedp.Action[chromedp.Void] {
	found := fmt.Sprintf(`[document, ...[...document.querySelectorAll("iframe")].map(f => f.contentDocument)]
		.filter(d => d).some(d => [...d.querySelectorAll(%q)].some(e => e.innerText.includes(%q)))`, selector, text)
	return func(ctx context.Context, target *chromedp.Target) (chromedp.Void, error) {
		lastLoad := time.Now()
		for {
			ok, err := chromedp.Evaluate[bool](found)(ctx, target)
			if err == nil && ok {
				return chromedp.Void{}, nil
			}
			broken, _ := chromedp.Evaluate[bool](`document.body !== null && document.body.innerText.includes("There's an error")`)(ctx, target)
			blank, _ := chromedp.Evaluate[bool](`document.body === null || document.body.innerText.trim() === ""`)(ctx, target)
			stuck := blank && time.Since(lastLoad) > 10*time.Second && networkQuietFor(ctx) > 5*time.Second
			if broken && time.Since(lastLoad) > 2*time.Second || stuck {
				if _, err := chromedp.Reload()(ctx, target); err != nil {
					return chromedp.Void{}, err
				}
				lastLoad = time.Now()
			}
			select {
			case <-ctx.Done():
				return chromedp.Void{}, fmt.Errorf("waiting for %q in %s: %w", text, selector, ctx.Err())
			case <-time.After(200 * time.Millisecond):
			}
		}
	}
}

// clickText clicks the link or button whose text is exactly text, once there is one.
func clickText(text string) chromedp.Action[chromedp.Void] {
	return poll(fmt.Sprintf(`(() => {
		const e = [...document.querySelectorAll("a, button")].find(e => e.innerText.trim() === %q);
		if (e) { e.click(); }
		return !!e;
	})()`, text))
}

// chooseOption opens the select whose input has id and picks the option named text, once
// there is one, until the select shows it.
func chooseOption(id, text string) chromedp.Action[chromedp.Void] {
	return poll(fmt.Sprintf(`(() => {
		const input = document.getElementById(%q);
		if (!input) { return false; }
		if (input.value === %q) { return true; }
		input.closest("button")?.click();
		const name = e => e.querySelector(".menu-item-wrapper")?.textContent.trim();
		[...document.querySelectorAll("[role=option]")].find(e => name(e) === %q)?.click();
		return false;
	})()`, id, text, text))
}

func poll(predicate string) chromedp.Action[chromedp.Void] {
	return chromedp.Poll[chromedp.Void](predicate,
		chromedp.WithPollingTimeout(30*time.Second), chromedp.WithPollingInterval(200*time.Millisecond))
}

func newBrowser(t *testing.T, chromium string) context.Context {
	t.Helper()
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(chromium),
		chromedp.NoSandbox,
		chromedp.DisableGPU,
		// The machine's network is closed; without these Chromium keeps trying to reach out.
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-quic", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.WindowSize(1400, 1000),
	)
	allocCtx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancelBrowser := chromedp.NewContext(allocCtx)
	t.Cleanup(func() {
		cancelBrowser() // closes the browser and waits for it
		cancelAlloc()
	})
	// The first run starts the browser and ties its life to ctx, so it runs without a
	// deadline; the wait for it has one, and cancelling the allocator kills the browser.
	started := make(chan error, 1)
	go func() { started <- chromedp.Do(ctx) }()
	select {
	case err := <-started:
		if err != nil {
			t.Fatalf("start Chromium: %v", err)
		}
	case <-time.After(time.Minute):
		cancelAlloc()
		t.Fatal("Chromium did not start within a minute")
	}
	ctx, err := recordBrowser(ctx)
	if err != nil {
		t.Fatalf("record the browser's tab: %v", err)
	}
	return ctx
}

// requireChromium finds Chromium, or skips the test; in CI (browserRequired) it fails.
func requireChromium(t *testing.T) string {
	t.Helper()
	chromium := findChromium()
	if chromium == "" {
		if os.Getenv(browserRequired) != "" {
			t.Fatalf("Chromium not found, and %s is set", browserRequired)
		}
		t.Skip("Chromium not installed (apt-get install chromium); CI installs it")
	}
	return chromium
}

// screenshotDir is where a browser test keeps its steps' screenshots: removed when the
// test passes, kept and named in the log when it fails.
func screenshotDir(t *testing.T) string {
	t.Helper()
	shots, err := os.MkdirTemp("", "clusterflow-ui-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("screenshots kept in %s", shots)
		} else {
			os.RemoveAll(shots)
		}
	})
	return shots
}

func findChromium() string {
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if path, err := exec.LookPath(name); err == nil {
			return path
		}
	}
	return ""
}

// TestWebUIDecodesThroughTheCodecServerOnly: with --codec-key-file, dev's Web UI shows a
// cluster's input decoded, through the codec server dev serves for the UI's origin only.
// The same page served without the key never holds the plain value, and the codec server
// refuses a request from another origin.
func TestWebUIDecodesThroughTheCodecServerOnly(t *testing.T) {
	t.Parallel()
	guard(t)
	chromium := requireChromium(t)
	dir := t.TempDir()
	data := filepath.Join(dir, "data")
	testenv.StopAllAtEnd(t, data)
	marker := "ui-marker-" + rand.Text()
	keys := filepath.Join(dir, "codec.keys")
	writeKeyFile(t, keys, newKeyLine(t, "ui-key"))
	script := filepath.Join(dir, "s.sh")
	if err := os.WriteFile(script, []byte("#!/bin/sh\ntrue\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	specFile := filepath.Join(dir, "c.yaml")
	if err := os.WriteFile(specFile, []byte("name: sealed\nroles:\n  - {name: w, members: 1, startscript: "+script+", env: {MARK: "+marker+"}}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if t.Failed() { // the server's and worker's side of what the page showed
			t.Logf("dev's log:\n%s", tailOfFiles(filepath.Join(dir, "dev.log")))
		}
	})
	logUIFailuresAtEnd(t, filepath.Join(dir, "dev.log"))
	uiAddr, codecAddr := freeAddress(t), freeAddress(t)
	args := []string{"dev", "-f", specFile, "--db", filepath.Join(dir, "dev.db"), "--data", data, "--address", freeAddress(t),
		"--ui-address", uiAddr, "--no-gateway", "--log-file", filepath.Join(dir, "dev.log")}
	dev := startDev(t, dir, "dev-codec", append(args, "--codec-key-file", keys, "--codec-address", codecAddr))
	if err := dev.WaitFor("Phase:    ready", 2*time.Minute); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(dev.Output(), "decoding through http://"+codecAddr) {
		t.Errorf("dev does not say the UI decodes through its codec server:\n%s", dev.Output())
	}
	// A page of another origin may not use the codec server.
	req, err := http.NewRequest(http.MethodPost, "http://"+codecAddr+"/default/decode", strings.NewReader(`{"payloads":[]}`))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Origin", "http://evil.example")
	resp, err := (&http.Client{Timeout: 30 * time.Second}).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusForbidden || resp.Header.Get("Access-Control-Allow-Origin") != "" {
		t.Errorf("the codec server answered a foreign origin: %d %v", resp.StatusCode, resp.Header)
	}

	shots := screenshotDir(t)
	ctx := newBrowser(t, chromium)
	page := "http://" + uiAddr + "/namespaces/default/workflows/" + url.PathEscape(workflows.ClusterWorkflowID("sealed"))
	out, _ := os.ReadFile(dev.Stdout)
	step(t, ctx, shots, "let-in", open(devUILogin(t, string(out), uiAddr), "body", "Workflows"))
	step(t, ctx, shots, "decoded-input",
		open(page, "h1", "cluster/sealed"),
		waitText("body", marker),
	)

	// The same page without the key: the history loads, the value does not.
	if code, err := dev.Signal(syscall.SIGTERM, 30*time.Second); err != nil || code != 0 {
		t.Fatalf("dev did not stop cleanly: %d %v", code, err)
	}
	dev = startDev(t, dir, "dev-nokey", args)
	if err := dev.WaitFor("Ready.", 2*time.Minute); err != nil {
		t.Fatal(err)
	}
	// The worker dev runs now has no key either: the cluster's next workflow task (its
	// reconcile, each minute) fails and waits for a worker with the key (the encryption test
	// checks that the workflow runs on). The page shows the input card with the ciphertext
	// (base64).
	step(t, ctx, shots, "encoded-input",
		open(page, "h1", "cluster/sealed"),
		waitText("body", "Input"),
		poll(`/[A-Za-z0-9+\/]{200}/.test(document.body.innerText)`),
	)
	html, err := browse(ctx, chromedp.Evaluate[string](`document.documentElement.outerHTML`))
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(html, marker) {
		t.Error("without the codec server, the page holds the plain value")
	}
}
