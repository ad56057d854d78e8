package main

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"
	"github.com/goccy/go-yaml"

	"github.com/geogate/geogate/internal/auth"
	"github.com/geogate/geogate/internal/openapi"
	"github.com/geogate/geogate/internal/openapi/contract"
	"github.com/geogate/geogate/internal/testenv"
)

// documentedOperations lists "METHOD /path" for every operation, and
// "METHOD name" for every webhook, as the documentation pages list them.
func documentedOperations(t *testing.T) []string {
	t.Helper()
	doc, err := contract.Load(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for path, item := range doc.Paths.Map() {
		for method := range item.Operations() {
			out = append(out, method+" "+path)
		}
	}
	// The loader keeps no webhooks (an OpenAPI 3.1 addition): read them
	// from the document's source.
	var src struct {
		Webhooks map[string]map[string]any `yaml:"webhooks"`
	}
	if err := yaml.Unmarshal(openapi.YAML(), &src); err != nil {
		t.Fatal(err)
	}
	for name, item := range src.Webhooks {
		for method := range item {
			out = append(out, strings.ToUpper(method)+" "+name)
		}
	}
	sort.Strings(out)
	return out
}

// TestDocsInBrowser opens /docs in Chromium, finds every documented route,
// authorizes with an API key and runs GET /within through "Try it out";
// then opens /redoc and finds every route there too. Anonymous callers get
// no scopes here, so the 200 proves the key went with the request.
func TestDocsInBrowser(t *testing.T) {
	pool, dbURL := testenv.DBWithURL(t)
	const secret = "browser-test-secret"
	_, err := auth.NewStore(pool).Create(context.Background(), auth.CreateOptions{
		Key:    auth.Key{ID: "browser", Scopes: []string{"proximity:read", "geofences:read", "tiles:read"}},
		Secret: secret,
	})
	if err != nil {
		t.Fatal(err)
	}
	base, _ := startService(t, map[string]string{"DATABASE_URL": dbURL, "AUTH_ANONYMOUS_SCOPES": "none"})
	ctx, problems := newBrowser(t, true, docsBrowser)
	dir := artifactDir(t)
	want := documentedOperations(t)

	t.Run("SwaggerUI", func(t *testing.T) {
		within := `#operations-proximity-within`
		err := chromedp.Do(ctx,
			chromedp.Navigate(base+"/docs"),
			chromedp.WaitVisible(chromedp.CSS(within)),
		)
		screenshot(t, ctx, dir, "docs-1-loaded")
		if err != nil {
			t.Fatalf("loading /docs: %v", err)
		}
		listed, err := chromedp.Run(ctx, chromedp.Evaluate[[]string](`Array.from(document.querySelectorAll('.opblock')).map(e =>
			e.querySelector('.opblock-summary-method').textContent.trim() + ' ' +
			e.querySelector('.opblock-summary-path').getAttribute('data-path'))`))
		if err != nil {
			t.Fatalf("listing /docs operations: %v", err)
		}
		sort.Strings(listed)
		if got, w := strings.Join(listed, "\n"), strings.Join(want, "\n"); got != w {
			t.Errorf("/docs lists\n%s\nwant\n%s", got, w)
		}

		// Authorize with the API key, then Try it out on /within.
		err = chromedp.Do(ctx,
			chromedp.Click(chromedp.CSS(`.btn.authorize`)),
			chromedp.WaitVisible(chromedp.CSS(`.modal-ux`)),
			chromedp.Func(func(ctx context.Context, tg *chromedp.Target) error {
				_, err := chromedp.Evaluate[bool](`(() => {
					const c = Array.from(document.querySelectorAll('.modal-ux .auth-container'))
						.find(e => e.textContent.includes('ApiKeyAuth'));
					c.querySelector('input').id = 'apikey-input';
					c.querySelector('button.authorize').id = 'apikey-authorize';
					return true })()`)(ctx, tg)
				return err
			}),
			chromedp.SendKeys(chromedp.CSS(`#apikey-input`), secret),
			chromedp.Click(chromedp.CSS(`#apikey-authorize`)),
			chromedp.Click(chromedp.CSS(`.modal-ux .btn-done`)),
			chromedp.WaitNotPresent(chromedp.CSS(`.modal-ux`)),
			chromedp.Click(chromedp.CSS(within+` .opblock-summary-control`)),
			chromedp.Click(chromedp.CSS(within+` .try-out__btn`)),
			chromedp.WaitVisible(chromedp.CSS(within+` tr[data-param-name="radius"] input`)),
		)
		if err != nil {
			screenshot(t, ctx, dir, "docs-2-failed")
			t.Fatalf("authorizing and opening Try it out: %v", err)
		}
		// Swagger UI fills the parameters from their examples; fill any it
		// left empty.
		for _, p := range [][2]string{{"lng", "13.4"}, {"lat", "52.5"}, {"radius", "500"}} {
			css := fmt.Sprintf(`%s tr[data-param-name=%q] input`, within, p[0])
			v, err := chromedp.Run(ctx, chromedp.Evaluate[string](fmt.Sprintf(`document.querySelector(%q).value`, css)))
			if err != nil {
				t.Fatalf("reading %s: %v", p[0], err)
			}
			if v != "" {
				continue
			}
			if err := chromedp.Do(ctx, chromedp.SendKeys(chromedp.CSS(css), p[1])); err != nil {
				t.Fatalf("filling %s: %v", p[0], err)
			}
		}
		status := chromedp.CSS(within + ` .live-responses-table tbody .response-col_status`)
		err = chromedp.Do(ctx,
			chromedp.Click(chromedp.CSS(within+` .execute`)),
			chromedp.WaitVisible(status),
		)
		screenshot(t, ctx, dir, "docs-2-try-it-out")
		if err != nil {
			t.Fatalf("running Try it out: %v", err)
		}
		code, err1 := chromedp.Run(ctx, chromedp.Text(status))
		body, err2 := chromedp.Run(ctx, chromedp.Text(chromedp.CSS(within+` .live-responses-table tbody .response-col_description`)))
		if err1 != nil || err2 != nil {
			t.Fatalf("reading the answer: %v %v", err1, err2)
		}
		if !strings.HasPrefix(strings.TrimSpace(code), "200") || !strings.Contains(body, "FeatureCollection") {
			t.Errorf("Try it out on /within: status %q, body %.300q; want 200 with a FeatureCollection", code, body)
		}
	})

	t.Run("ReDoc", func(t *testing.T) {
		err := chromedp.Do(ctx,
			chromedp.Navigate(base+"/redoc"),
			chromedp.WaitVisible(chromedp.CSS(`[data-section-id="tag/proximity/operation/within"]`)),
		)
		screenshot(t, ctx, dir, "redoc")
		if err != nil {
			t.Fatalf("loading /redoc: %v", err)
		}
		text, err := chromedp.Run(ctx, chromedp.Evaluate[string](`document.body.innerText`))
		if err != nil {
			t.Fatal(err)
		}
		ops, err := chromedp.Run(ctx, chromedp.Evaluate[int](`document.querySelectorAll('.menu-content li[data-item-id*="/operation/"], .menu-content li[data-item-id*="/paths/"]').length`))
		if err != nil {
			t.Fatal(err)
		}
		if ops != len(want) {
			t.Errorf("/redoc menu lists %d operations, want %d", ops, len(want))
		}
		for _, op := range want {
			path := op[strings.Index(op, " ")+1:]
			if !strings.HasPrefix(path, "/") {
				continue // a webhook: ReDoc shows its summary, counted above
			}
			if !strings.Contains(text, path) {
				t.Errorf("/redoc does not show %s", path)
			}
		}
	})

	// No CSP error, no failed load: ReDoc's footer logo, which it takes
	// from its CDN, is served from the vendored assets instead.
	for _, p := range problems() {
		t.Errorf("browser reported: %s", p)
	}
}
