package operations_test

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/webhook-inbox/webhook-inbox/internal/testkit/factory"
	"github.com/webhook-inbox/webhook-inbox/internal/testkit/field"
	"github.com/webhook-inbox/webhook-inbox/shared/inbox"
	"github.com/webhook-inbox/webhook-inbox/shared/operations"
)

// searchIDs runs q and returns the ids found (one page) and the page.
func searchIDs(t *testing.T, f *fixture, q operations.EventQuery) ([]int64, *operations.EventPage) {
	t.Helper()
	p, err := f.read.Events(f.ctx, q)
	if err != nil {
		t.Fatalf("search %+v: %v", q, err)
	}
	ids := []int64{}
	for _, e := range p.Events {
		ids = append(ids, e.ID)
	}
	return ids, p
}

func TestSearchFindsExactlyTheContainingPayloads(t *testing.T) {
	t.Parallel()
	f := setup(t, false)
	at := time.Now().Add(-time.Hour)
	ev := func(src, typ, body string, opts *factory.EventOpts) int64 {
		if opts == nil {
			opts = &factory.EventOpts{}
		}
		opts.Source, opts.Type, opts.Body = src, typ, []byte(body)
		at = at.Add(time.Second)
		opts.CreatedAt = at
		return factory.Event(f.ctx, t, f.store, opts).ID
	}
	a := ev("stripe", "order.paid", `{"customer":"cus_123","total":1500,"items":[{"sku":"a"},{"sku":"b"}],"meta":{"region":"eu"}}`, nil)
	b := ev("stripe", "order.paid", `{"customer":"cus_456","total":1500,"items":[{"sku":"b"}]}`, nil)
	c := ev("shop", "order.created", `{"customer":"cus_123","total":20,"tags":["vip","eu"]}`, nil)
	ev("shop", "order.created", `customer=cus_123&total=1500`, nil)                                      // not JSON: no payload
	ev("stripe", "order.paid", `{"customer":"cus_1234","total":"1500"}`, nil)                            // neither equal
	ev("stripe", "order.paid", `{"customer":"cus_123"}`, &factory.EventOpts{State: inbox.StateExpunged}) // payload erased
	d := ev("stripe", "order.paid", `{"customer":"cus_123","total":1500}`, &factory.EventOpts{State: inbox.StateDead})

	for name, tc := range map[string]struct {
		q    operations.EventQuery
		want []int64
	}{
		"a string field":              {operations.EventQuery{Match: `{"customer":"cus_123"}`}, []int64{d, c, a}},
		"a number":                    {operations.EventQuery{Match: `{"total": 1500}`}, []int64{d, b, a}},
		"an element of an array":      {operations.EventQuery{Match: `{"items":[{"sku":"a"}]}`}, []int64{a}},
		"an element every one shares": {operations.EventQuery{Match: `{"items":[{"sku":"b"}]}`}, []int64{b, a}},
		"a nested object":             {operations.EventQuery{Match: `{"meta":{"region":"eu"}}`}, []int64{a}},
		"a string in an array":        {operations.EventQuery{Match: `{"tags":["eu"]}`}, []int64{c}},
		"two fields at once":          {operations.EventQuery{Match: `{"customer":"cus_123","total":1500}`}, []int64{d, a}},
		"no payload holds it":         {operations.EventQuery{Match: `{"customer":"cus_999"}`}, []int64{}},
		"a top-level array":           {operations.EventQuery{Match: `["cus_123"]`}, []int64{}},
		"with a source":               {operations.EventQuery{Match: `{"customer":"cus_123"}`, Source: "shop"}, []int64{c}},
		"with a type":                 {operations.EventQuery{Match: `{"customer":"cus_123"}`, Type: "order.paid"}, []int64{d, a}},
		"with a state":                {operations.EventQuery{Match: `{"customer":"cus_123"}`, State: "dead"}, []int64{d}},
		"with a state none has":       {operations.EventQuery{Match: `{"total":1500}`, State: "processed"}, []int64{}},
		"with a window":               {operations.EventQuery{Match: `{"total":1500}`, Window: operations.Window{From: at.Add(-5 * time.Second), To: at}}, []int64{b}},
	} {
		ids, p := searchIDs(t, f, tc.q)
		if !slices.Equal(ids, tc.want) {
			t.Errorf("%s: found %v, want %v", name, ids, tc.want)
		}
		if p.Search == nil || !p.Search.Complete || p.NextBefore != nil {
			t.Errorf("%s: search %+v, next %v: want the whole window searched", name, p.Search, p.NextBefore)
		}
	}
}

// Without a lower bound a search walks the last day (DefaultSearchWindow);
// an older event is found by widening the window.
func TestSearchDefaultsToTheLastDay(t *testing.T) {
	t.Parallel()
	f := setup(t, false)
	old := factory.Event(f.ctx, t, f.store, &factory.EventOpts{Body: []byte(`{"customer":"cus_123"}`), CreatedAt: time.Now().Add(-50 * time.Hour)})
	recent := factory.Event(f.ctx, t, f.store, &factory.EventOpts{Body: []byte(`{"customer":"cus_123"}`)})
	ids, p := searchIDs(t, f, operations.EventQuery{Match: `{"customer":"cus_123"}`})
	if !slices.Equal(ids, []int64{recent.ID}) {
		t.Fatalf("the last day holds %v, want %d", ids, recent.ID)
	}
	field.Check(t, "search", field.Eq("From", p.Search.From, p.At.Add(-24*time.Hour)), field.Eq("To.IsZero", p.Search.To.IsZero(), true),
		field.Eq("DownTo", p.Search.DownTo, p.Search.From), field.Eq("Scanned", p.Search.Scanned, 1))
	ids, _ = searchIDs(t, f, operations.EventQuery{Match: `{"customer":"cus_123"}`, Window: operations.Window{Since: operations.Span(3 * 24 * time.Hour)}})
	if !slices.Equal(ids, []int64{recent.ID, old.ID}) {
		t.Fatalf("the last three days hold %v, want %d and %d", ids, recent.ID, old.ID)
	}
	// A window that ends names its day before the end.
	to := time.Now().Add(-49 * time.Hour)
	ids, p = searchIDs(t, f, operations.EventQuery{Match: `{"customer":"cus_123"}`, Window: operations.Window{To: to}})
	if !slices.Equal(ids, []int64{old.ID}) || !p.Search.From.Equal(to.Add(-24*time.Hour)) {
		t.Fatalf("the day before %v holds %v (searched from %v), want %d", to, ids, p.Search.From, old.ID)
	}
}

// A search over more events than its budget answers what it found with a
// cursor; following the cursors finds every match once, newest first.
func TestSearchStopsAtItsBudgetAndContinues(t *testing.T) {
	t.Parallel()
	f := setup(t, false)
	operations.SetSearchBudget(f.read, 7, 3)
	var want []int64
	for i := range 40 {
		e := factory.Event(f.ctx, t, f.store, &factory.EventOpts{Body: []byte(fmt.Sprintf(`{"n":%d,"even":%t}`, i, i%2 == 0))})
		if i%2 == 0 {
			want = append(want, e.ID)
		}
	}
	slices.Reverse(want)
	q := operations.EventQuery{Match: `{"even":true}`, Limit: 4}
	var got []int64
	partial := 0
	for pages := 0; ; pages++ {
		if pages > 40 {
			t.Fatalf("no end after %d pages: found %v", pages, got)
		}
		p := must[*operations.EventPage](t)(f.read.Events(f.ctx, q))
		for _, e := range p.Events {
			got = append(got, e.ID)
		}
		if p.Search.Scanned > 7 {
			t.Fatalf("page %d read %d events, over the budget of 7", pages, p.Search.Scanned)
		}
		if p.NextBefore == nil {
			if !p.Search.Complete {
				t.Fatalf("the last page says the window was not searched to its end: %+v", p.Search)
			}
			break
		}
		if p.Search.Complete {
			t.Fatalf("page %d has a cursor but says the window was searched: %+v", pages, p.Search)
		}
		if len(p.Events) < 4 {
			partial++
			// What it says it searched down to is the oldest event it
			// read, below the last it found.
			if n := len(p.Events); n > 0 && p.Search.DownTo.After(p.Events[n-1].ReceivedAt) {
				t.Fatalf("page %d searched down to %v, above its last event's receipt %v", pages, p.Search.DownTo, p.Events[n-1].ReceivedAt)
			}
		}
		q.Before = *p.NextBefore
	}
	if !slices.Equal(got, want) {
		t.Fatalf("the pages found %v, want %v (no duplicate, no gap)", got, want)
	}
	if partial == 0 {
		t.Errorf("no page stopped at the budget short of a full page")
	}
}

func TestSearchByAMetadataHeader(t *testing.T) {
	t.Parallel()
	f := setup(t, false)
	hook := factory.Event(f.ctx, t, f.store, &factory.EventOpts{Source: "gh", SourceKind: "github", Body: []byte(`{}`), Metadata: map[string]string{"github_hook_id": "42"}})
	factory.Event(f.ctx, t, f.store, &factory.EventOpts{Source: "gh", SourceKind: "github", Body: []byte(`{}`), Metadata: map[string]string{"github_hook_id": "43"}})
	// Metadata stays when the payload goes: an archived event is found by
	// its header.
	arch := factory.Event(f.ctx, t, f.store, &factory.EventOpts{Source: "gh", SourceKind: "github", State: inbox.StateArchived, Metadata: map[string]string{"github_hook_id": "42"}})
	ids, _ := searchIDs(t, f, operations.EventQuery{Header: "x-github-hook-id=42"})
	if !slices.Equal(ids, []int64{arch.ID, hook.ID}) {
		t.Fatalf("hook 42: found %v, want %d and %d", ids, arch.ID, hook.ID)
	}
	ids, _ = searchIDs(t, f, operations.EventQuery{Header: "X-GitHub-Hook-ID=42", Match: `{}`, State: "pending"})
	if !slices.Equal(ids, []int64{hook.ID}) {
		t.Fatalf("hook 42 with a payload: found %v, want %d", ids, hook.ID)
	}
	_, err := f.read.Events(f.ctx, operations.EventQuery{Header: "X-Customer-Id=cus_123"})
	cause(t, err, inbox.CauseInvalidArgument)
	for _, kept := range []string{"X-Customer-Id", "X-GitHub-Hook-ID (github)", "X-Shopify-Shop-Domain (shopify)", "I-Twilio-Idempotency-Token (twilio)"} {
		if !strings.Contains(inbox.MessageOf(err), kept) {
			t.Errorf("the refusal %q does not name %q", inbox.MessageOf(err), kept)
		}
	}
}

func TestSearchRefusesWhatItCannotSearch(t *testing.T) {
	t.Parallel()
	f := setup(t, false)
	for name, q := range map[string]operations.EventQuery{
		"not JSON":           {Match: `{"customer":`},
		"a string":           {Match: `"cus_123"`},
		"a number":           {Match: `1000`},
		"null":               {Match: `null`},
		"too long":           {Match: `{"a":"` + strings.Repeat("x", operations.MaxMatchBytes) + `"}`},
		"a header, no value": {Header: "X-GitHub-Hook-ID"},
		"a header, empty":    {Header: "X-GitHub-Hook-ID="},
		"a value too long":   {Header: "X-GitHub-Hook-ID=" + strings.Repeat("1", inbox.MaxEventIDBytes+1)},
		"an empty window":    {Match: `{}`, Window: operations.Window{From: time.Now(), To: time.Now().Add(-time.Hour)}},
	} {
		_, err := f.read.Events(f.ctx, q)
		if inbox.CauseOf(err) != inbox.CauseInvalidArgument {
			t.Errorf("%s: %v (cause %s), want %s", name, err, inbox.CauseOf(err), inbox.CauseInvalidArgument)
		}
	}
}
