package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/cdp"
	cdplog "github.com/chromedp/cdproto/log"
	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"

	"github.com/geogate/geogate/internal/testenv"
)

// chromiumPath finds the browser the browser tests drive: $CHROMIUM, else
// Debian's chromium. The tests fail without one; only -short skips them.
func chromiumPath(t *testing.T) string {
	t.Helper()
	testenv.NeedServices(t, "Chromium (a browser test)")
	for _, p := range []string{os.Getenv("CHROMIUM"), "/usr/bin/chromium", "/usr/bin/chromium-browser", "/usr/bin/google-chrome"} {
		if p == "" {
			continue
		}
		if _, err := exec.LookPath(p); err == nil {
			return p
		}
	}
	t.Fatal("no Chromium found: install it with `apt-get install -y chromium` (scripts/test.sh does) or set CHROMIUM to its path")
	return ""
}

// artifactDir is where screenshots go: $TEST_ARTIFACTS/<test>, else
// test-artifacts/<test> at the repository root (git-ignored).
func artifactDir(t *testing.T) string {
	t.Helper()
	root := os.Getenv("TEST_ARTIFACTS")
	if root == "" {
		root = filepath.Join("..", "..", "test-artifacts")
	}
	dir := filepath.Join(root, t.Name())
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	return dir
}

// Browsers for the two kinds of page: the documentation pages must not
// log a single error (a page that breaks its own Content-Security-Policy
// shows up there); the map renders WebGL on the CPU (SwiftShader), whose
// warnings are not the page's fault, so only uncaught exceptions count.
var (
	docsBrowser = []chromedp.ExecAllocatorOption{
		chromedp.DisableGPU,
		chromedp.Flag("disable-sync", true),
		chromedp.WindowSize(1280, 1600),
	}
	mapBrowser = []chromedp.ExecAllocatorOption{
		chromedp.Flag("enable-unsafe-swiftshader", true),
		chromedp.Flag("use-angle", "swiftshader"),
		chromedp.Flag("ignore-gpu-blocklist", true),
		chromedp.WindowSize(1200, 800),
	}
)

// newBrowser starts a headless Chromium with a fresh profile and the given
// options, and returns a tab context bounded to two minutes and a func
// listing the problems seen so far: uncaught exceptions and, when
// strict, console errors and browser log errors too.
func newBrowser(t *testing.T, strict bool, kind []chromedp.ExecAllocatorOption) (context.Context, func() []string) {
	t.Helper()
	opts := append([]chromedp.ExecAllocatorOption{
		chromedp.ExecPath(chromiumPath(t)),
		chromedp.Headless,
		chromedp.NoSandbox,
		chromedp.NoFirstRun,
		chromedp.NoDefaultBrowserCheck,
		chromedp.UserDataDir(t.TempDir()),
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-dev-shm-usage", true),
	}, kind...)
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	tab, cancelTab := chromedp.NewContext(actx)
	t.Cleanup(func() { cancelTab(); cancelAlloc() })

	var mu sync.Mutex
	var problems []string
	add := func(msg string) {
		mu.Lock()
		problems = append(problems, msg)
		mu.Unlock()
	}
	err := chromedp.Listen(tab, func(ev any) {
		switch e := ev.(type) {
		case *runtime.EventExceptionThrown:
			msg := "uncaught: " + e.ExceptionDetails.Text
			if e.ExceptionDetails.Exception != nil {
				msg += " " + e.ExceptionDetails.Exception.Description
			}
			add(msg)
		case *runtime.EventConsoleAPICalled:
			if !strict || e.Type != runtime.ConsoleAPICalledTypeError {
				return
			}
			var parts []string
			for _, a := range e.Args {
				parts = append(parts, strings.Trim(string(a.Value), `"`)+a.Description)
			}
			add("console error: " + strings.Join(parts, " "))
		case *cdplog.EventEntryAdded:
			if strict && e.Entry.Level == cdplog.EntryLevelError {
				add(fmt.Sprintf("log (%s): %s %s", e.Entry.Source, e.Entry.Text, e.Entry.URL))
			}
		}
	})
	if err != nil {
		t.Fatalf("starting Chromium: %v", err)
	}
	if strict {
		enableLog := chromedp.Func(func(ctx context.Context, tg *chromedp.Target) error {
			_, err := cdp.Call(ctx, tg, cdplog.Enable, cdp.Empty{})
			return err
		})
		if err := chromedp.Do(tab, enableLog); err != nil {
			t.Fatalf("starting Chromium: %v", err)
		}
	}
	ctx, cancel := context.WithTimeout(tab, 2*time.Minute)
	t.Cleanup(cancel)
	return ctx, func() []string {
		mu.Lock()
		defer mu.Unlock()
		return append([]string(nil), problems...)
	}
}

func screenshot(t *testing.T, ctx context.Context, dir, name string) {
	t.Helper()
	img, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	if err != nil {
		t.Logf("screenshot %s: %v", name, err)
		return
	}
	p := filepath.Join(dir, name+".png")
	if err := os.WriteFile(p, img, 0o644); err != nil {
		t.Logf("screenshot %s: %v", name, err)
		return
	}
	t.Logf("screenshot: %s", p)
}
