package console_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/webhook-inbox/webhook-inbox/internal/testkit/factory"
	"github.com/webhook-inbox/webhook-inbox/internal/testkit/pgtest"
	"github.com/webhook-inbox/webhook-inbox/internal/testkit/tier"
	"github.com/webhook-inbox/webhook-inbox/shared/inbox"
	"github.com/webhook-inbox/webhook-inbox/shared/storage"
)

// An operator searches the events by a JSON field of their payload and by
// a kept header through the events form, and sees exactly the matching
// events and how far the search went; a document that is not JSON is
// refused in place, the form keeping what was typed.
func TestBrowserSearch(t *testing.T) {
	tier.Heavy(t, "starts Chromium")
	t.Parallel()
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) {
			t.Parallel()
			ctx := t.Context()
			store := storage.New(pgtest.Pool(t))
			want := map[string]bool{}
			for i := range 8 {
				customer := "cus_456"
				if i%3 == 0 {
					customer = "cus_123"
				}
				id := fmt.Sprintf("evt_order_%d", i)
				factory.Event(ctx, t, store, &factory.EventOpts{Source: "shop", SourceKind: "shopify", EventID: id, Type: "orders/paid",
					Body:     []byte(fmt.Sprintf(`{"id":%d,"customer":{"id":%q},"total":%d}`, i, customer, 500*i)),
					Metadata: map[string]string{"shopify_shop_domain": fmt.Sprintf("shop-%d.example", i%2)}})
				want[id] = customer == "cus_123"
			}
			// Archived: no payload in Postgres any more, not matched.
			factory.Event(ctx, t, store, &factory.EventOpts{Source: "shop", SourceKind: "shopify", EventID: "evt_order_archived", Type: "orders/paid",
				Body: []byte(`{"customer":{"id":"cus_123"}}`), State: inbox.StateArchived})
			want["evt_order_archived"] = false
			srv := serve(t, store, b.api(t, store, nil), nil).srv
			tab := browser(t)

			run(t, tab, "search by a payload field",
				chromedp.Navigate(srv.URL+"/events?token="+testToken),
				chromedp.WaitVisible("#filters"),
				chromedp.SetValue(`#filters input[name="match"]`, `{"customer":{"id":"cus_123"}}`),
				chromedp.Submit(`#filters`),
				chromedp.WaitVisible("#searched"))
			rows := value(t, tab, "the matching events", chromedp.Text("#events tbody"))
			for id, match := range want {
				if strings.Contains(rows, id+"\t") || strings.Contains(rows, id+"\n") || strings.HasSuffix(rows, id) {
					if !match {
						t.Errorf("%s is listed, but its payload has another customer (or none):\n%s", id, rows)
					}
				} else if match {
					t.Errorf("%s is not listed:\n%s", id, rows)
				}
			}
			if n := strings.Count(rows, "evt_order_"); n != 3 {
				t.Errorf("%d events listed, want the 3 of cus_123:\n%s", n, rows)
			}
			note := value(t, tab, "the search's note", chromedp.Text("#searched"))
			if !strings.Contains(note, "Searched 9 events") || !strings.Contains(note, "the whole window") {
				t.Errorf("the search's note: %q", note)
			}

			// Each search starts from a fresh list, which has no note or
			// error yet: what is waited for is the answer's.
			run(t, tab, "search by a kept header",
				chromedp.Navigate(srv.URL+"/events"),
				chromedp.WaitVisible("#filters"),
				chromedp.SetValue(`#filters input[name="match"]`, `{"total":1500}`),
				chromedp.SetValue(`#filters input[name="header"]`, "X-Shopify-Shop-Domain=shop-1.example"),
				chromedp.Submit(`#filters`),
				chromedp.WaitVisible("#searched"))
			rows = value(t, tab, "the events of the header", chromedp.Text("#events tbody"))
			if strings.Count(rows, "evt_order_") != 1 || !strings.Contains(rows, "evt_order_3") {
				t.Errorf("total 1500 at shop-1: want evt_order_3 alone:\n%s", rows)
			}

			run(t, tab, "search with a broken document",
				chromedp.Navigate(srv.URL+"/events"),
				chromedp.WaitVisible("#filters"),
				chromedp.SetValue(`#filters input[name="match"]`, `{"customer":`),
				chromedp.Submit(`#filters`),
				chromedp.WaitVisible(".error"))
			msg := value(t, tab, "the refusal", chromedp.Text(".error"))
			typed := value(t, tab, "the form", chromedp.Value(`#filters input[name="match"]`))
			if !strings.Contains(msg, "match: not JSON") || typed != `{"customer":` {
				t.Errorf("a broken document: %q, the form holds %q", msg, typed)
			}
		})
	}
}
