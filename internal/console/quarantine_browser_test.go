package console_test

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/webhook-inbox/webhook-inbox/internal/sender"
	"github.com/webhook-inbox/webhook-inbox/internal/testkit/factory"
	"github.com/webhook-inbox/webhook-inbox/internal/testkit/operatortest"
	"github.com/webhook-inbox/webhook-inbox/internal/testkit/pgtest"
	"github.com/webhook-inbox/webhook-inbox/internal/testkit/tier"
	"github.com/webhook-inbox/webhook-inbox/shared/operations"
	"github.com/webhook-inbox/webhook-inbox/shared/source"
	"github.com/webhook-inbox/webhook-inbox/shared/storage"
)

// The sources as the operator fixed them: the secret GitHub signs with.
const consoleSources = `{"sources": {"github": {"kind": "github", "secrets": ["gh-secret-console-0123456789"]}}}`

// quarantineAPIs are the console's backends with the sources document a
// re-ingest verifies with.
var quarantineAPIs = []struct {
	name string
	api  func(t *testing.T, store *storage.Store, sources func(context.Context) (*source.Set, error)) operations.API
}{
	{"direct", func(t *testing.T, store *storage.Store, sources func(context.Context) (*source.Set, error)) operations.API {
		api, err := operations.New(operations.Config{Access: operations.AccessAct}, operations.Deps{Store: store, Sources: sources})
		if err != nil {
			t.Fatal(err)
		}
		return api
	}},
	{"remote", func(t *testing.T, store *storage.Store, sources func(context.Context) (*source.Set, error)) operations.API {
		r := operatortest.StartWithSources(t, store, nil, nil, sources)
		return r.Client(t, r.Operator)
	}},
}

// quarantineSetup is a console over a database holding one quarantined
// GitHub delivery that the fixed sources verify, and a forged one whose
// body carries terminal escapes; it returns their ids.
func quarantineSetup(t *testing.T, api func(*testing.T, *storage.Store, func(context.Context) (*source.Set, error)) operations.API) (f *fixture, good, forged int64) {
	t.Helper()
	store := storage.New(pgtest.Pool(t))
	set, err := source.Parse([]byte(consoleSources))
	if err != nil {
		t.Fatal(err)
	}
	gh, _ := set.Lookup("github")
	body := []byte(`{"action":"opened","issue":{"id":21,"title":"A bug"}}`)
	sr, err := sender.SignEvent(gh, body, "console-q-1", "issues", time.Now())
	if err != nil {
		t.Fatal(err)
	}
	good = factory.Quarantined(t.Context(), t, store, &factory.QuarantinedOpts{Source: "github", Kind: "github", Header: sr.Header, Body: body})
	forged = factory.Quarantined(t.Context(), t, store, &factory.QuarantinedOpts{Source: "stripe", Kind: "stripe",
		Header: http.Header{"Stripe-Signature": {"t=1,v1=00"}}, Body: []byte("{\"x\":\"\x1b[2J\"}")})
	f = serve(t, store, api(t, store, func(context.Context) (*source.Set, error) { return set, nil }), nil)
	return f, good, forged
}

// TestBrowserReingest drives the quarantine in Chromium: the list, a
// delivery with its kept headers and its body escaped, then a re-ingest
// of the GitHub delivery, counted and confirmed: it is stored, due, and
// leaves the quarantine; the forged one stays.
func TestBrowserReingest(t *testing.T) {
	tier.Heavy(t, "starts Chromium")
	t.Parallel()
	for _, b := range quarantineAPIs {
		t.Run(b.name, func(t *testing.T) {
			t.Parallel()
			f, good, forged := quarantineSetup(t, b.api)
			ctx := browser(t)
			run(t, ctx, "open the quarantine",
				chromedp.Navigate(f.srv.URL+"/quarantine?token="+testToken),
				chromedp.WaitVisible("#quarantine"))
			text := value(t, ctx, "quarantine", chromedp.Text("#quarantine tbody"))
			if !strings.Contains(text, "github") || !strings.Contains(text, "signature_mismatch") {
				t.Errorf("quarantine:\n%s", text)
			}
			screenshot(t, ctx, "quarantine")
			run(t, ctx, "open the forged delivery",
				chromedp.Navigate(fmt.Sprintf("%s/quarantine/%d", f.srv.URL, forged)),
				chromedp.WaitVisible("#body"))
			body := value(t, ctx, "body", chromedp.Text("#body"))
			headers := value(t, ctx, "headers", chromedp.Text("#headers"))
			if strings.ContainsRune(body, 0x1b) || !strings.Contains(body, `\u001b[2J`) || !strings.Contains(headers, "Stripe-Signature") {
				t.Errorf("the forged delivery: body %q, headers %q", body, headers)
			}

			run(t, ctx, "ask to re-ingest",
				chromedp.Navigate(f.srv.URL+"/quarantine"),
				chromedp.WaitVisible("#quarantine"),
				chromedp.Click(fmt.Sprintf("#reingest-%d", good)),
				chromedp.WaitVisible("#confirm-count"))
			text = value(t, ctx, "confirmation", chromedp.Text("#confirm-count"))
			if !strings.Contains(text, "This verifies 1 quarantined delivery again") {
				t.Errorf("confirmation: %q", text)
			}
			if _, err := f.store.EventGetByKey(f.ctx, "github", "console-q-1"); err == nil {
				t.Fatal("asking to confirm stored the delivery")
			}
			screenshot(t, ctx, "reingest-confirm")
			run(t, ctx, "confirm",
				chromedp.Click(`#confirm button[type="submit"]`),
				chromedp.WaitVisible("#reingested"))
			text = value(t, ctx, "outcome", chromedp.Text("#reingested"))
			if !strings.Contains(text, "1 stored, 0 already stored, 0 still refused") {
				t.Errorf("outcome: %q", text)
			}
			text = value(t, ctx, "quarantine after", chromedp.Text("main"))
			if strings.Contains(text, "github") || !strings.Contains(text, "stripe") {
				t.Errorf("after the re-ingest the quarantine shows:\n%s", text)
			}
			ev, err := f.store.EventGetByKey(f.ctx, "github", "console-q-1")
			if err != nil || ev.Type != "issues" || ev.ProcessedAt != nil {
				t.Fatalf("the re-ingested event: %+v, %v", ev, err)
			}
			if got := factory.ProcessDue(f.ctx, t, f.store, time.Now()); len(got) != 1 || got[0].ID != ev.ID {
				t.Fatalf("processed %d events, want the re-ingested one", len(got))
			}
		})
	}
}
