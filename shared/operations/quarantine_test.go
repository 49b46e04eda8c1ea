package operations_test

import (
	"bytes"
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/webhook-inbox/webhook-inbox/internal/sender"
	"github.com/webhook-inbox/webhook-inbox/internal/testkit/factory"
	"github.com/webhook-inbox/webhook-inbox/internal/testkit/field"
	"github.com/webhook-inbox/webhook-inbox/shared/inbox"
	"github.com/webhook-inbox/webhook-inbox/shared/operations"
	"github.com/webhook-inbox/webhook-inbox/shared/receiver"
	"github.com/webhook-inbox/webhook-inbox/shared/source"
)

// The sources before and after an operator fixed them: the sender rolled
// GitHub's secret first, so the receiver refused its deliveries until the
// new secret was added.
const (
	staleSourcesDoc = `{"sources": {
  "github": {"kind": "github", "secrets": ["gh-secret-old-0123456789abc"]},
  "stripe": {"kind": "stripe", "secrets": ["whsec_test_old_0123456789abcde"]}
}}`
	fixedSourcesDoc = `{"sources": {
  "github": {"kind": "github", "secrets": ["gh-secret-new-0123456789abc", "gh-secret-old-0123456789abc"]},
  "stripe": {"kind": "stripe", "secrets": ["whsec_test_new_0123456789abcde"]}
}}`
	// senderSourcesDoc is what the senders sign with.
	senderSourcesDoc = `{"sources": {
  "github": {"kind": "github", "secrets": ["gh-secret-new-0123456789abc"]},
  "stripe": {"kind": "stripe", "secrets": ["whsec_test_new_0123456789abcde"]}
}}`
)

// receivedAt is when the receiver got the deliveries of these tests: long
// before the database's now, as a re-ingest days later finds them.
var receivedAt = time.Unix(1_700_000_000, 0)

// quarantineFixture is the operations fixture with a sources document an
// operator can change, read by the Services at each re-ingest.
type quarantineFixture struct {
	*fixture
	doc atomic.Pointer[string]
}

func quarantineSetup(t *testing.T, withArchive bool) *quarantineFixture {
	t.Helper()
	f := setup(t, withArchive)
	q := &quarantineFixture{fixture: f}
	doc := staleSourcesDoc
	q.doc.Store(&doc)
	deps := operations.Deps{Store: f.store, Blobs: f.blobs, Sources: func(context.Context) (*source.Set, error) {
		return source.Parse([]byte(*q.doc.Load()))
	}}
	f.act = must[*operations.Service](t)(operations.New(operations.Config{Access: operations.AccessAct, Archive: f.arch}, deps))
	f.read = must[*operations.Service](t)(operations.New(operations.Config{Access: operations.AccessRead, Archive: f.arch}, deps))
	return q
}

// fixSources is the operator adding the sender's new secret.
func (q *quarantineFixture) fixSources() {
	doc := fixedSourcesDoc
	q.doc.Store(&doc)
}

// deliver sends r to a receiver holding the current sources at
// receivedAt, and returns its answer once its background writers are
// done.
func (q *quarantineFixture) deliver(r *http.Request) int {
	q.t.Helper()
	set, err := source.Parse([]byte(*q.doc.Load()))
	if err != nil {
		q.t.Fatal(err)
	}
	h, err := receiver.New(receiver.Config{}, receiver.Deps{Sources: set, Store: q.store, Clock: fixedClock(receivedAt)})
	if err != nil {
		q.t.Fatal(err)
	}
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	if err := h.Close(context.Background()); err != nil {
		q.t.Fatal(err)
	}
	return w.Code
}

type fixedClock time.Time

func (c fixedClock) Now() time.Time { return time.Time(c) }

// signedBy is a delivery of body to name, signed by its sender at at.
func signedBy(t *testing.T, name string, body []byte, eventID, eventType string, at time.Time) *http.Request {
	t.Helper()
	set, err := source.Parse([]byte(senderSourcesDoc))
	if err != nil {
		t.Fatal(err)
	}
	src, _ := set.Lookup(name)
	sr, err := sender.SignEvent(src, body, eventID, eventType, at)
	if err != nil {
		t.Fatal(err)
	}
	r := httptest.NewRequest(http.MethodPost, "/webhooks/"+name, bytes.NewReader(body))
	for k, v := range sr.Header {
		r.Header[k] = v
	}
	return r
}

func testdata(t *testing.T, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "source", "testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func (q *quarantineFixture) quarantine() []operations.Quarantined {
	q.t.Helper()
	p, err := q.read.Quarantine(q.ctx, operations.QuarantineQuery{Limit: operations.MaxLimit})
	if err != nil {
		q.t.Fatal(err)
	}
	return p.Deliveries
}

func expect(n int) *int { return &n }

// A GitHub delivery refused for a secret rolled in the wrong order is
// kept; re-ingested before the fix it stays with its failure; after the
// fix it is counted, confirmed, stored as the receiver stores it, recorded
// and processed once; a second re-ingest finds nothing, and the sender's
// redelivery is a duplicate.
func TestReingestAfterTheSecretIsFixed(t *testing.T) {
	t.Parallel()
	q := quarantineSetup(t, false)
	body := testdata(t, "github_issues_opened.json")
	const delivery = "72d3162e-cc78-11e3-81ab-4c9367dc0958"
	req := func() *http.Request {
		r := signedBy(t, "github", body, delivery, "issues", receivedAt)
		r.Header.Set("X-GitHub-Hook-ID", "292430182")
		return r
	}
	if code := q.deliver(req()); code != http.StatusUnauthorized {
		t.Fatalf("delivery answered %d", code)
	}
	held := q.quarantine()
	if len(held) != 1 || held[0].Cause != inbox.CauseSignatureMismatch {
		t.Fatalf("quarantine %+v", held)
	}

	// Before the fix: still refused, kept, with the failure shown.
	res, err := q.act.Reingest(q.ctx, operations.ReingestRequest{Select: operations.QuarantineSelection{Source: "github"}})
	if err != nil {
		t.Fatal(err)
	}
	field.Must(t, "re-ingest before the fix", field.Eq("Refused", res.Refused, 1), field.Eq("Stored", res.Stored, 0))
	held = q.quarantine()
	if len(held) != 1 || held[0].LastCause == nil || *held[0].LastCause != string(inbox.CauseSignatureMismatch) || held[0].TriedAt == nil {
		t.Fatalf("after a failed re-ingest: %+v", held)
	}

	q.fixSources()
	dry, err := q.read.Reingest(q.ctx, operations.ReingestRequest{Select: operations.QuarantineSelection{Source: "github"}, DryRun: true})
	if err != nil || dry.Matched != 1 {
		t.Fatalf("dry run %+v, %v", dry, err)
	}
	_, err = q.act.Reingest(q.ctx, operations.ReingestRequest{Select: operations.QuarantineSelection{Source: "github"}, Expect: expect(2)})
	cause(t, err, inbox.CauseCountChanged)
	res, err = q.act.Reingest(q.ctx, operations.ReingestRequest{Select: operations.QuarantineSelection{Source: "github"}, Expect: expect(1), Reason: "secret fixed"})
	if err != nil {
		t.Fatal(err)
	}
	field.Must(t, "re-ingest", field.Eq("Matched", res.Matched, 1), field.Eq("Stored", res.Stored, 1), field.Eq("Refused", res.Refused, 0),
		field.Eq("outcome", res.Deliveries[0].Outcome, operations.ReingestStored))
	if len(q.quarantine()) != 0 {
		t.Fatal("a stored delivery stays in quarantine")
	}
	ev, err := q.store.EventGetByKey(q.ctx, "github", delivery)
	if err != nil {
		t.Fatal(err)
	}
	field.Must(t, "stored event", field.Eq("ID", ev.ID, *res.Deliveries[0].Event), field.Eq("SourceKind", ev.SourceKind, "github"),
		field.Eq("Type", ev.Type, "issues"), field.Eq("Body", string(ev.Body), string(body)),
		field.Eq("github_hook_id", ev.Metadata["github_hook_id"], "292430182"))

	acts, err := q.read.Actions(q.ctx, operations.ActionQuery{})
	if err != nil {
		t.Fatal(err)
	}
	if a := acts.Actions[0]; a.Action != inbox.ActionReingest || a.Events != 1 || a.Actor != "alice@ops" || a.Reason == nil || *a.Reason != "secret fixed" {
		t.Fatalf("latest action %+v", a)
	}

	if got := factory.ProcessDue(q.ctx, t, q.store, time.Now()); len(got) != 1 || got[0].ID != ev.ID {
		t.Fatalf("processed %d events, want the re-ingested one", len(got))
	}
	// Again: nothing left to re-ingest; the sender's redelivery is a
	// duplicate; nothing more is processed.
	again, err := q.act.Reingest(q.ctx, operations.ReingestRequest{Select: operations.QuarantineSelection{Source: "github"}})
	if err != nil || again.Matched != 0 || again.Stored != 0 {
		t.Fatalf("second re-ingest %+v, %v", again, err)
	}
	if code := q.deliver(req()); code != http.StatusOK {
		t.Fatalf("redelivery answered %d", code)
	}
	if got := factory.ProcessDue(q.ctx, t, q.store, time.Now()); len(got) != 0 {
		t.Fatalf("processed %d more events: a re-ingested event runs once", len(got))
	}
	after := must[*inbox.Event](t)(q.store.EventGetByID(q.ctx, ev.ID))
	if after.Attempts != 1 {
		t.Fatalf("attempts %d, want 1", after.Attempts)
	}
}

// A re-ingest of a delivery already stored (it came again with the right
// secret meanwhile) is a duplicate and leaves the quarantine.
func TestReingestOfAStoredDeliveryIsADuplicate(t *testing.T) {
	t.Parallel()
	q := quarantineSetup(t, false)
	body := testdata(t, "github_issues_opened.json")
	q.deliver(signedBy(t, "github", body, "dup-1", "issues", receivedAt))
	q.fixSources()
	if code := q.deliver(signedBy(t, "github", body, "dup-1", "issues", receivedAt)); code != http.StatusOK {
		t.Fatalf("redelivery answered %d", code)
	}
	res, err := q.act.Reingest(q.ctx, operations.ReingestRequest{Select: operations.QuarantineSelection{All: true}})
	if err != nil {
		t.Fatal(err)
	}
	field.Must(t, "re-ingest", field.Eq("Duplicates", res.Duplicates, 1), field.Eq("Stored", res.Stored, 0))
	if len(q.quarantine()) != 0 {
		t.Fatal("a duplicate stays in quarantine")
	}
}

// A Stripe delivery's signed time is checked against when it was
// received, not now: one refused for its signature verifies years later
// once the secret is fixed; one whose signed time was already stale at
// receipt is still refused and stays, with its cause.
func TestReingestChecksTimestampsAtReceipt(t *testing.T) {
	t.Parallel()
	q := quarantineSetup(t, false)
	fresh := bytes.Replace(testdata(t, "stripe_invoice_paid.json"), []byte("evt_1PqAbCDeFgHiJkLm"), []byte("evt_fresh"), 1)
	stale := bytes.Replace(testdata(t, "stripe_invoice_paid.json"), []byte("evt_1PqAbCDeFgHiJkLm"), []byte("evt_stale"), 1)
	q.deliver(signedBy(t, "stripe", fresh, "", "", receivedAt))
	q.deliver(signedBy(t, "stripe", stale, "", "", receivedAt.Add(-time.Hour)))
	if held := q.quarantine(); len(held) != 2 {
		t.Fatalf("quarantine %+v", held)
	}
	q.fixSources()
	res, err := q.act.Reingest(q.ctx, operations.ReingestRequest{Select: operations.QuarantineSelection{Source: "stripe"}})
	if err != nil {
		t.Fatal(err)
	}
	field.Must(t, "re-ingest", field.Eq("Stored", res.Stored, 1), field.Eq("Refused", res.Refused, 1))
	if _, err := q.store.EventGetByKey(q.ctx, "stripe", "evt_fresh"); err != nil {
		t.Fatal(err)
	}
	held := q.quarantine()
	if len(held) != 1 || held[0].LastCause == nil || *held[0].LastCause != string(inbox.CauseTimestampOutOfTolerance) {
		t.Fatalf("what still fails: %+v", held)
	}
	d, err := q.read.QuarantinedDelivery(q.ctx, held[0].ID)
	if err != nil {
		t.Fatal(err)
	}
	field.Must(t, "kept delivery", field.Eq("Body", string(d.Body), string(stale)), field.Eq("signature kept", len(d.Headers["Stripe-Signature"]), 1),
		field.Eq("ReceivedAt", d.ReceivedAt.Equal(receivedAt), true))
}

// A source removed from the document leaves its deliveries refused; a
// Service without the sources document refuses to re-ingest.
func TestReingestNeedsTheSources(t *testing.T) {
	t.Parallel()
	q := quarantineSetup(t, false)
	q.deliver(signedBy(t, "github", testdata(t, "github_issues_opened.json"), "gone-1", "issues", receivedAt))
	doc := `{"sources": {"stripe": {"kind": "stripe", "secrets": ["whsec_test_new_0123456789abcde"]}}}`
	q.doc.Store(&doc)
	res, err := q.act.Reingest(q.ctx, operations.ReingestRequest{Select: operations.QuarantineSelection{All: true}})
	if err != nil || res.Refused != 1 || *res.Deliveries[0].Cause != string(inbox.CauseUnknownSource) {
		t.Fatalf("re-ingest %+v, %v", res, err)
	}
	none := must[*operations.Service](t)(operations.New(operations.Config{Access: operations.AccessAct}, operations.Deps{Store: q.store}))
	_, err = none.Reingest(q.ctx, operations.ReingestRequest{Select: operations.QuarantineSelection{All: true}})
	cause(t, err, inbox.CauseSourcesNotConfigured)
	_, err = q.act.Reingest(q.ctx, operations.ReingestRequest{})
	cause(t, err, inbox.CauseInvalidArgument)
}

// A read-only Service counts but neither re-ingests nor purges.
func TestQuarantineActionsAreRefusedReadOnly(t *testing.T) {
	t.Parallel()
	q := quarantineSetup(t, false)
	q.deliver(signedBy(t, "github", testdata(t, "github_issues_opened.json"), "ro-1", "issues", receivedAt))
	q.fixSources()
	_, err := q.read.Reingest(q.ctx, operations.ReingestRequest{Select: operations.QuarantineSelection{All: true}})
	cause(t, err, inbox.CauseReadOnly)
	_, err = q.read.Purge(q.ctx, operations.PurgeRequest{Select: operations.QuarantineSelection{Source: "github"}})
	cause(t, err, inbox.CauseReadOnly)
	if n := must[*operations.PurgeResult](t)(q.read.Purge(q.ctx, operations.PurgeRequest{Select: operations.QuarantineSelection{Source: "github"}, DryRun: true})).Deliveries; n != 1 {
		t.Fatalf("purge dry run counts %d", n)
	}
	if len(q.quarantine()) != 1 {
		t.Fatal("a read-only Service changed the quarantine")
	}
}

// A purge deletes one delivery, or a source's, counted then confirmed,
// and is recorded; it must name a delivery or a source.
func TestPurge(t *testing.T) {
	t.Parallel()
	q := quarantineSetup(t, false)
	body := testdata(t, "github_issues_opened.json")
	for _, id := range []string{"p-1", "p-2", "p-3"} {
		q.deliver(signedBy(t, "github", body, id, "issues", receivedAt))
	}
	q.deliver(signedBy(t, "stripe", bytes.Replace(testdata(t, "stripe_invoice_paid.json"), []byte("evt_1PqAbCDeFgHiJkLm"), []byte("evt_p"), 1), "", "", receivedAt))
	held := q.quarantine()
	if len(held) != 4 {
		t.Fatalf("quarantine %d", len(held))
	}
	_, err := q.act.Purge(q.ctx, operations.PurgeRequest{})
	cause(t, err, inbox.CauseInvalidArgument)
	gone := held[1] // newest first: the stripe delivery, then github's
	if gone.Source != "github" {
		t.Fatalf("second newest %+v", gone)
	}
	one, err := q.act.Purge(q.ctx, operations.PurgeRequest{Select: operations.QuarantineSelection{ID: gone.ID}, Expect: expect(1)})
	if err != nil || one.Deliveries != 1 {
		t.Fatalf("purge one: %+v, %v", one, err)
	}
	_, err = q.act.Purge(q.ctx, operations.PurgeRequest{Select: operations.QuarantineSelection{Source: "github"}, Expect: expect(3)})
	cause(t, err, inbox.CauseCountChanged)
	src, err := q.act.Purge(q.ctx, operations.PurgeRequest{Select: operations.QuarantineSelection{Source: "github"}, Expect: expect(2), Reason: "forged"})
	if err != nil || src.Deliveries != 2 {
		t.Fatalf("purge a source: %+v, %v", src, err)
	}
	if rest := q.quarantine(); len(rest) != 1 || rest[0].Source != "stripe" {
		t.Fatalf("left %+v", rest)
	}
	acts := must[*operations.ActionPage](t)(q.read.Actions(q.ctx, operations.ActionQuery{}))
	if a := acts.Actions[0]; a.Action != inbox.ActionPurge || a.ID != src.ActionID || !bytes.Contains(a.Filter, []byte(`"deleted":2`)) {
		t.Fatalf("latest action %+v (%s)", a, a.Filter)
	}
	_, err = q.read.QuarantinedDelivery(q.ctx, gone.ID)
	cause(t, err, inbox.CauseQuarantineNotFound)
}

// An expunge of an event erases its quarantined copies: those of its
// source with its body, and those carrying its event id in a kept header
// (GitHub's X-GitHub-Delivery), and no other.
func TestExpungeReachesTheQuarantine(t *testing.T) {
	t.Parallel()
	q := quarantineSetup(t, true)
	body := testdata(t, "github_issues_opened.json")
	other := bytes.Replace(body, []byte("Found a bug"), []byte("Found two bugs"), 1)
	q.deliver(signedBy(t, "github", body, "exp-1", "issues", receivedAt))  // same body, same id
	q.deliver(signedBy(t, "github", other, "exp-1", "issues", receivedAt)) // same id, another body
	unrelated := bytes.Replace(body, []byte("Found a bug"), []byte("Unrelated"), 1)
	q.deliver(signedBy(t, "github", unrelated, "exp-2", "issues", receivedAt)) // neither
	q.fixSources()
	if code := q.deliver(signedBy(t, "github", body, "exp-1", "issues", receivedAt)); code != http.StatusOK {
		t.Fatalf("delivery answered %d", code)
	}
	ref := operations.EventRef{Source: "github", EventID: "exp-1"}
	plan, err := q.act.Expunge(q.ctx, operations.ExpungeRequest{Event: ref, DryRun: true})
	if err != nil || plan.QuarantinedCopies != 2 {
		t.Fatalf("expunge dry run %+v, %v", plan, err)
	}
	done, err := q.act.Expunge(q.ctx, operations.ExpungeRequest{Event: ref, Reason: "erasure request"})
	if err != nil || done.QuarantinedCopies != 2 {
		t.Fatalf("expunge %+v, %v", done, err)
	}
	rest := q.quarantine()
	if len(rest) != 1 {
		t.Fatalf("left %d quarantined deliveries, want the unrelated one", len(rest))
	}
	d := must[*operations.QuarantinedDetail](t)(q.read.QuarantinedDelivery(q.ctx, rest[0].ID))
	if !bytes.Equal(d.Body, unrelated) {
		t.Fatal("the expunge erased the wrong delivery")
	}
}

// A re-ingest reads a few deliveries at a time and takes them all: 40
// forged ones are each verified, refused and kept with their failure.
func TestReingestTakesEveryDeliveryInChunks(t *testing.T) {
	t.Parallel()
	q := quarantineSetup(t, false)
	q.fixSources()
	for i := range 40 {
		factory.Quarantined(q.ctx, t, q.store, &factory.QuarantinedOpts{Source: "stripe", Kind: "stripe",
			Header: http.Header{"Stripe-Signature": {"t=1700000000,v1=" + strings.Repeat("0", 64)}}, Body: []byte(`{"id":"evt_forged_` + strconv.Itoa(i) + `"}`)})
	}
	res, err := q.act.Reingest(q.ctx, operations.ReingestRequest{Select: operations.QuarantineSelection{Source: "stripe"}, Expect: expect(40)})
	if err != nil {
		t.Fatal(err)
	}
	field.Must(t, "re-ingest", field.Eq("Matched", res.Matched, 40), field.Eq("Refused", res.Refused, 40), field.Eq("Deliveries", len(res.Deliveries), 40),
		field.Eq("More", res.More, false))
	seen := map[int64]bool{}
	for _, d := range res.Deliveries {
		seen[d.ID] = true
	}
	if len(seen) != 40 {
		t.Fatalf("%d distinct deliveries re-ingested, want 40", len(seen))
	}
}
