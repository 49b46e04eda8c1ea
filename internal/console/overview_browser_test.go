package console_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/webhook-inbox/webhook-inbox/internal/testkit/factory"
	"github.com/webhook-inbox/webhook-inbox/shared/inbox"
	"github.com/webhook-inbox/webhook-inbox/shared/storage"
)

// history gives the browser fixture a day behind it, so the overview's
// charts (and their screenshot) show something like a real one: stripe
// events processed every hour, a few attempts failing (their retries not
// due before the test ends), and a secret roll that github's deliveries
// were refused for, two hours long, among a scatter of other refusals.
// None of it is due, dead or github's pending: the browser test's other
// checks see the same counts with it or without it.
func history(ctx context.Context, t *testing.T, store *storage.Store) {
	t.Helper()
	now := time.Now()
	const mismatch = "the signature matches no configured secret"
	for h := 1; h < 24; h++ {
		at := now.Add(-time.Duration(h)*time.Hour + 7*time.Minute)
		n := 2 + (h*7)%5
		if h >= 9 && h <= 11 {
			n += 6 // a busy morning
		}
		for half, k := range []int{n, n/2 + 1} {
			created := at.Add(time.Duration(half) * 30 * time.Minute)
			processed := created.Add(30 * time.Second)
			factory.Events(ctx, t, store, k, &factory.EventOpts{Type: "invoice.paid", CreatedAt: created, Now: processed, State: inbox.StateProcessed, ProcessedAt: &processed})
		}
		if h%5 == 2 {
			factory.Event(ctx, t, store, &factory.EventOpts{Source: "shop", SourceKind: "shopify", Type: "orders/create", CreatedAt: at, Now: at.Add(time.Minute),
				State: inbox.StateRetrying, NextAttemptAt: now.Add(6 * time.Hour), LastError: "the downstream API answered 503"})
		}
		switch {
		case h >= 4 && h <= 5:
			factory.Rejection(ctx, t, store, &factory.RejectionOpts{Source: "github", Cause: inbox.CauseSignatureMismatch, ReceivedAt: at, Suppressed: int64(8 + h), Message: mismatch})
			factory.Rejection(ctx, t, store, &factory.RejectionOpts{Source: "github", Cause: inbox.CauseSignatureMismatch, ReceivedAt: at.Add(20 * time.Minute), Suppressed: 5, Message: mismatch})
		case h%6 == 0:
			factory.Rejection(ctx, t, store, &factory.RejectionOpts{Source: "(unknown)", Cause: inbox.CauseUnknownSource, ReceivedAt: at, Message: "no such source; the name requested: stripe-old"})
		case h%7 == 3:
			factory.Rejection(ctx, t, store, &factory.RejectionOpts{Source: "stripe", Cause: inbox.CauseTimestampOutOfTolerance, ReceivedAt: at, Suppressed: 1,
				Message: "the signed timestamp is more than 5m0s away from now"})
		}
	}
	// The receivers' record of the sources: stripe delivered a moment
	// ago; github, expected hourly, has been quiet for three hours.
	factory.SourceActivity(ctx, t, store, now.Add(-24*time.Hour),
		storage.SourceRecord{Source: "github", SilentAfter: time.Hour, ReceivedAt: now.Add(-3 * time.Hour)},
		storage.SourceRecord{Source: "stripe", SilentAfter: 6 * time.Hour, ReceivedAt: now.Add(-time.Minute)})
}

// checkOverviewSources: the overview's sources table shows each source's
// last delivery, and github as silent.
func checkOverviewSources(t *testing.T, ctx context.Context) {
	t.Helper()
	run(t, ctx, "the sources", chromedp.WaitVisible("#sources"))
	rows := value(t, ctx, "sources rows", chromedp.Text("#sources tbody"))
	for _, want := range []string{"github", "3h0m0s ago", "silent since 2h0m0s ago", "stripe", "ok"} {
		if !strings.Contains(rows, want) {
			t.Errorf("the sources table lacks %q:\n%s", want, rows)
		}
	}
	if silent := value(t, ctx, "silent row", chromedp.Text("#sources tr.silent")); !strings.Contains(silent, "github") {
		t.Errorf("the silent row is %q, want github's", silent)
	}
}

// checkOverviewCharts: the overview shows both charts as SVG, with bars,
// lines and legends.
func checkOverviewCharts(t *testing.T, ctx context.Context) {
	t.Helper()
	run(t, ctx, "the charts", chromedp.WaitVisible("#chart-received"), chromedp.WaitVisible("#chart-processing"))
	for sel, wants := range map[string][]string{
		"#chart-received":   {`<rect class="s-accepted"`, `<rect class="s-c0"`, "refused: signature_mismatch"},
		"#chart-processing": {`<polyline class="line s-processed"`, `<polyline class="line s-failed"`, `<polyline class="line s-dead"`},
	} {
		svg := value(t, ctx, "chart "+sel, chromedp.OuterHTML(sel))
		for _, want := range wants {
			if !strings.Contains(svg, want) {
				t.Errorf("%s lacks %s:\n%s", sel, want, svg)
			}
		}
	}
	legend := value(t, ctx, "legends", chromedp.Text(".charts"))
	for _, want := range []string{"accepted", "refused: signature_mismatch", "processed", "failed", "dead-lettered"} {
		if !strings.Contains(legend, want) {
			t.Errorf("the legends lack %q:\n%s", want, legend)
		}
	}
}

// checkRefusalsPage: the overview's link opens the refusals page, which
// explains the causes it lists.
func checkRefusalsPage(t *testing.T, ctx context.Context) {
	t.Helper()
	run(t, ctx, "open the refusals from the overview",
		chromedp.Click(`#refusals a[href="/refusals"]`),
		chromedp.WaitVisible("#causes"))
	text := value(t, ctx, "refusals", chromedp.Text("main"))
	for _, want := range []string{"signature_mismatch", "No configured secret produced the signature", "unknown_source", "(unknown)", "stripe-old"} {
		if !strings.Contains(text, want) {
			t.Errorf("the refusals page lacks %q:\n%s", want, text)
		}
	}
	screenshot(t, ctx, "refusals")
}
