package operatorclient_test

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/webhook-inbox/webhook-inbox/internal/devstack/locals3"
	"github.com/webhook-inbox/webhook-inbox/internal/operatorclient"
	"github.com/webhook-inbox/webhook-inbox/internal/sender"
	"github.com/webhook-inbox/webhook-inbox/internal/testkit/factory"
	"github.com/webhook-inbox/webhook-inbox/internal/testkit/field"
	"github.com/webhook-inbox/webhook-inbox/internal/testkit/operatortest"
	"github.com/webhook-inbox/webhook-inbox/internal/testkit/pgtest"
	"github.com/webhook-inbox/webhook-inbox/internal/testkit/s3test"
	"github.com/webhook-inbox/webhook-inbox/shared/archive"
	"github.com/webhook-inbox/webhook-inbox/shared/inbox"
	"github.com/webhook-inbox/webhook-inbox/shared/operations"
	"github.com/webhook-inbox/webhook-inbox/shared/operatorapi"
	"github.com/webhook-inbox/webhook-inbox/shared/source"
	"github.com/webhook-inbox/webhook-inbox/shared/storage"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// remoteFixture is a database with events in several states, an archived
// event, the operator API over it, the Service the direct path uses, and
// the client as the operator and as the viewer.
type remoteFixture struct {
	store            *storage.Store
	remote           *operatortest.Remote
	direct           *operations.Service
	operator, viewer *operatorclient.Client
	archived, dead   *inbox.Event
}

func remoteSetup(t *testing.T) *remoteFixture {
	t.Helper()
	ctx := t.Context()
	store := storage.New(pgtest.Pool(t))
	arch := &archive.Config{Prefix: "archive", MinAge: time.Minute}
	blobs := s3test.Open(t, s3test.VersionedBucket(t, s3test.ServerWith(t, locals3.Options{Versioning: true})))
	f := &remoteFixture{store: store}
	old := time.Now().Add(-time.Hour)
	f.archived = factory.Event(ctx, t, store, &factory.EventOpts{EventID: "evt_archived", Body: []byte(`{"id":"evt_archived","type":"invoice.paid"}`),
		State: inbox.StateProcessed, ProcessedAt: &old})
	factory.Events(ctx, t, store, 3, &factory.EventOpts{Type: "invoice.paid"})
	f.dead = factory.Event(ctx, t, store, &factory.EventOpts{Source: "github", EventID: "gh-1", State: inbox.StateDead, LastError: "tracker down"})
	factory.Rejection(ctx, t, store, &factory.RejectionOpts{Source: "stripe", Cause: inbox.CauseSignatureMismatch})
	var err error
	if f.direct, err = operations.New(operations.Config{Access: operations.AccessAct, Archive: arch}, operations.Deps{Store: store, Blobs: blobs}); err != nil {
		t.Fatal(err)
	}
	if _, err := f.direct.ArchiveRun(operations.WithOperator(ctx, operations.Operator{Name: "setup"}), operations.ArchiveRunRequest{}); err != nil {
		t.Fatal(err)
	}
	f.remote = operatortest.Start(t, store, arch, blobs)
	f.operator, f.viewer = f.remote.Client(t, f.remote.Operator), f.remote.Client(t, f.remote.Viewer)
	return f
}

// instants are the answers' clocks, which two reads never share, and the
// ages measured against them.
var (
	instants = regexp.MustCompile(`"at":"[^"]+"`)
	ages     = regexp.MustCompile(`"([a-z_]*age_seconds)":[0-9.e+-]+`)
)

// same fails unless the two answers are the same JSON but for their
// clocks.
func same(t *testing.T, what string, direct, remote any) {
	t.Helper()
	a, _ := json.Marshal(direct)
	b, _ := json.Marshal(remote)
	a, b = instants.ReplaceAll(a, []byte(`"at":""`)), instants.ReplaceAll(b, []byte(`"at":""`))
	a, b = ages.ReplaceAll(a, []byte(`"$1":0`)), ages.ReplaceAll(b, []byte(`"$1":0`))
	if !bytes.Equal(a, b) {
		t.Errorf("%s differs through the operator API:\ndirect: %s\nremote: %s", what, a, b)
	}
}

func must[T any](t *testing.T) func(T, error) T {
	return func(v T, err error) T {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
}

// Every read answers through the operator API exactly what the Service
// answers directly.
func TestReadsAreTheSameThroughTheAPI(t *testing.T) {
	t.Parallel()
	f := remoteSetup(t)
	ctx := t.Context()
	type read struct {
		name string
		call func(operations.API) (any, error)
	}
	for _, r := range []read{
		{"stats", func(a operations.API) (any, error) {
			return a.Stats(ctx, operations.StatsQuery{Window: operations.Span(time.Hour), Charts: true})
		}},
		{"refusals", func(a operations.API) (any, error) { return a.Refusals(ctx, operations.RefusalsQuery{}) }},
		{"events", func(a operations.API) (any, error) {
			return a.Events(ctx, operations.EventQuery{Type: "invoice.paid", Limit: 2, Window: operations.Window{Since: operations.Span(24 * time.Hour)}})
		}},
		{"find", func(a operations.API) (any, error) { return a.Find(ctx, operations.FindQuery{Find: "gh-1"}) }},
		{"event", func(a operations.API) (any, error) {
			return a.Event(ctx, operations.EventRef{Source: "github", EventID: "gh-1"})
		}},
		{"dead letters", func(a operations.API) (any, error) {
			return a.DeadLetters(ctx, operations.DeadLetterQuery{Source: "github"})
		}},
		{"dead letters by criteria", func(a operations.API) (any, error) {
			return a.DeadLetters(ctx, operations.DeadLetterQuery{Criteria: operations.Criteria{
				IDs: []int64{1, 2, 3}, Cause: string(inbox.CauseHandlerFailed), Error: "DEAD", Received: operations.Window{Since: operations.Span(time.Hour)}}})
		}},
		{"actions", func(a operations.API) (any, error) {
			return a.Actions(ctx, operations.ActionQuery{Since: operations.Span(time.Hour)})
		}},
	} {
		direct := must[any](t)(r.call(f.direct))
		same(t, r.name, direct, must[any](t)(r.call(f.viewer)))
	}
	// A body from the archive, whole and verified.
	direct := must[*operations.Body](t)(f.direct.EventBody(ctx, f.archived.ID))
	remote := must[*operations.Body](t)(f.viewer.EventBody(ctx, f.archived.ID))
	if !field.Check(t, "body through the API",
		field.Is("Bytes", string(remote.Bytes), bytes.Equal(direct.Bytes, remote.Bytes), "the direct read's bytes"),
		field.Eq("From", remote.From, operations.BodyFromArchive),
		field.Eq("ArchiveKey", remote.ArchiveKey, direct.ArchiveKey),
		field.Eq("SHA256", remote.SHA256, direct.SHA256),
	) {
		t.FailNow()
	}
}

// A body larger than one answer comes in chunks, put back together and
// checked against its hash.
func TestALargeBodyComesInChunks(t *testing.T) {
	t.Parallel()
	store := storage.New(pgtest.Pool(t))
	raw := bytes.Repeat([]byte("x"), operatorapi.BodyChunk*2+5)
	e := factory.Event(t.Context(), t, store, &factory.EventOpts{Body: raw})
	remote := operatortest.Start(t, store, nil, nil)
	b := must[*operations.Body](t)(remote.Client(t, remote.Viewer).EventBody(t.Context(), e.ID))
	if !bytes.Equal(b.Bytes, raw) || b.From != operations.BodyFromPostgres {
		t.Fatalf("body of %d bytes, from %s", len(b.Bytes), b.From)
	}
}

// The viewer reads and counts; IAM refuses its actions at the acting URL
// (cause forbidden), and whoami says it may only read. The operator acts,
// and the record names its verified principal, not anything it sent.
func TestAccessIsTheIdentitysAndActionsRecordThePrincipal(t *testing.T) {
	t.Parallel()
	f := remoteSetup(t)
	ctx := operations.WithOperator(t.Context(), operations.Operator{Name: "mallory (ignored: the API records the principal)"})
	who := must[*operations.Identity](t)(f.viewer.Whoami(ctx))
	if who.Access != operations.AccessRead || !who.Verified || who.Operator != f.remote.Viewer.UserARN {
		t.Fatalf("the viewer is %+v", who)
	}
	if who := must[*operations.Identity](t)(f.operator.Whoami(ctx)); who.Access != operations.AccessAct || who.Operator != f.remote.Operator.UserARN {
		t.Fatalf("the operator is %+v", who)
	}
	sel := operations.DeadLetterSelection{Source: "github"}
	if dry := must[*operations.RequeueResult](t)(f.viewer.Requeue(ctx, operations.RequeueRequest{Select: sel, DryRun: true})); dry.Events != 1 {
		t.Fatalf("the viewer's dry run = %+v", dry)
	}
	_, err := f.viewer.Requeue(ctx, operations.RequeueRequest{Select: sel})
	if inbox.CauseOf(err) != inbox.CauseForbidden || !strings.Contains(inbox.MessageOf(err), "OperatorActPolicy") {
		t.Fatalf("the viewer's requeue: %v", err)
	}
	_, err = f.operator.Requeue(ctx, operations.RequeueRequest{Select: sel, Expect: new(7)})
	if inbox.CauseOf(err) != inbox.CauseCountChanged {
		t.Fatalf("a requeue of a stale count: %v", err)
	}
	res := must[*operations.RequeueResult](t)(f.operator.Requeue(ctx, operations.RequeueRequest{Select: sel, Expect: new(1), Reason: "INC-3"}))
	if res.Events != 1 {
		t.Fatalf("requeue = %+v", res)
	}
	acts := must[*operations.ActionPage](t)(f.viewer.Actions(ctx, operations.ActionQuery{}))
	if len(acts.Actions) != 1 || acts.Actions[0].Actor != f.remote.Operator.UserARN || *acts.Actions[0].Reason != "INC-3" {
		t.Fatalf("actions = %+v", acts.Actions)
	}
}

// A resolve and a discard count, refuse and act through the operator API
// as they do directly: the same counts, the same causes, the records under
// the principal.
func TestResolveAndDiscardThroughTheAPI(t *testing.T) {
	t.Parallel()
	f := remoteSetup(t)
	ctx := t.Context()
	due := factory.Event(ctx, t, f.store, &factory.EventOpts{Source: "github", EventID: "gh-due", State: inbox.StateRetrying, LastError: "Tracker 503"})
	rsel := operations.DeadLetterSelection{Source: "github", Criteria: operations.Criteria{Error: "factory: DEAD"}}
	dsel := operations.DiscardSelection{Criteria: operations.Criteria{IDs: []int64{due.ID}, Error: "tracker"}}
	same(t, "resolve dry run", must[*operations.ResolveResult](t)(f.direct.Resolve(ctx, operations.ResolveRequest{Select: rsel, DryRun: true})),
		must[*operations.ResolveResult](t)(f.viewer.Resolve(ctx, operations.ResolveRequest{Select: rsel, DryRun: true})))
	same(t, "discard dry run", must[*operations.DiscardResult](t)(f.direct.Discard(ctx, operations.DiscardRequest{Select: dsel, DryRun: true})),
		must[*operations.DiscardResult](t)(f.viewer.Discard(ctx, operations.DiscardRequest{Select: dsel, DryRun: true})))
	if _, err := f.viewer.Resolve(ctx, operations.ResolveRequest{Select: rsel, Reason: "r"}); inbox.CauseOf(err) != inbox.CauseForbidden {
		t.Fatalf("the viewer's resolve: %v", err)
	}
	if _, err := f.operator.Resolve(ctx, operations.ResolveRequest{Select: rsel}); inbox.CauseOf(err) != inbox.CauseInvalidArgument {
		t.Fatalf("a resolve without a reason: %v", err)
	}
	if _, err := f.operator.Discard(ctx, operations.DiscardRequest{Select: dsel, Expect: new(5), Reason: "r"}); inbox.CauseOf(err) != inbox.CauseCountChanged {
		t.Fatalf("a discard of a stale count: %v", err)
	}
	rs := must[*operations.ResolveResult](t)(f.operator.Resolve(ctx, operations.ResolveRequest{Select: rsel, Expect: new(1), Reason: "tracker retired"}))
	ds := must[*operations.DiscardResult](t)(f.operator.Discard(ctx, operations.DiscardRequest{Select: dsel, Expect: new(1), Reason: "tracker retired"}))
	field.Must(t, "actions", field.Printed("Resolved", rs.Resolved, 1), field.Printed("Discarded", ds.Discarded, 1))
	acts := must[*operations.ActionPage](t)(f.viewer.Actions(ctx, operations.ActionQuery{}))
	for _, a := range acts.Actions[:2] {
		if a.Actor != f.remote.Operator.UserARN || *a.Reason != "tracker retired" {
			t.Errorf("action %+v", a)
		}
	}
}

// The API's refusals come back with their cause and message; a request
// nobody signed is refused by the stand-in for IAM, as by Lambda.
func TestErrorsKeepTheirCause(t *testing.T) {
	t.Parallel()
	f := remoteSetup(t)
	ctx := t.Context()
	_, err := f.viewer.Event(ctx, operations.EventRef{ID: f.dead.ID + 1000})
	if inbox.CauseOf(err) != inbox.CauseEventNotFound {
		t.Fatalf("an unknown event: %v", err)
	}
	_, err = f.viewer.Events(ctx, operations.EventQuery{State: "sleeping"})
	if inbox.CauseOf(err) != inbox.CauseInvalidArgument || !strings.Contains(inbox.MessageOf(err), "sleeping") {
		t.Fatalf("a bad state: %v", err)
	}
	unsigned := must[*operatorclient.Client](t)(operatorclient.New(operatorclient.Config{ReadURL: f.remote.ReadURL, HTTP: http.DefaultClient}))
	_, err = unsigned.Stats(ctx, operations.StatsQuery{})
	if inbox.CauseOf(err) != inbox.CauseForbidden {
		t.Fatalf("an unsigned request: %v", err)
	}
}

// New refuses what is no operator function's URL: plain HTTP off
// loopback, a query, credentials in the URL.
func TestNewChecksTheURLs(t *testing.T) {
	t.Parallel()
	for _, u := range []string{"http://abc.lambda-url.us-east-1.on.aws/", "https://u:p@abc.lambda-url.us-east-1.on.aws/", "https://abc.lambda-url.us-east-1.on.aws/?x=1", "not a url", ""} {
		if _, err := operatorclient.New(operatorclient.Config{ActURL: u, HTTP: http.DefaultClient}); err == nil {
			t.Errorf("%q accepted", u)
		}
	}
	if _, err := operatorclient.New(operatorclient.Config{ActURL: "https://abc.lambda-url.us-east-1.on.aws/", HTTP: http.DefaultClient}); err != nil {
		t.Errorf("a function URL: %v", err)
	}
}

// A search by content answers the same through the API, its refusals
// keep their cause (a 400, never a 5xx), and the API bounds the document
// before anything reads it.
func TestSearchIsTheSameThroughTheAPI(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	store := storage.New(pgtest.Pool(t))
	hit := factory.Event(ctx, t, store, &factory.EventOpts{Source: "gh", SourceKind: "github", Body: []byte(`{"customer":{"id":"cus_123"},"total":1500}`),
		Metadata: map[string]string{"github_hook_id": "42"}})
	factory.Event(ctx, t, store, &factory.EventOpts{Source: "gh", SourceKind: "github", Body: []byte(`{"customer":{"id":"cus_456"},"total":1500}`)})
	direct, err := operations.New(operations.Config{Access: operations.AccessRead}, operations.Deps{Store: store})
	if err != nil {
		t.Fatal(err)
	}
	remote := operatortest.Start(t, store, nil, nil)
	viewer := remote.Client(t, remote.Viewer)
	q := operations.EventQuery{Match: `{"customer":{"id":"cus_123"}}`, Header: "X-GitHub-Hook-ID=42", Source: "gh",
		Window: operations.Window{From: time.Now().Add(-time.Hour)}}
	d := must[*operations.EventPage](t)(direct.Events(ctx, q))
	r := must[*operations.EventPage](t)(viewer.Events(ctx, q))
	same(t, "search", d, r)
	if len(r.Events) != 1 || r.Events[0].ID != hit.ID || r.Search == nil || !r.Search.Complete {
		t.Fatalf("the search through the API found %+v (search %+v), want event %d alone", r.Events, r.Search, hit.ID)
	}
	for name, q := range map[string]operations.EventQuery{
		"not JSON":          {Match: `{"customer"`},
		"a scalar":          {Match: `"cus_123"`},
		"too long":          {Match: `{"a":"` + strings.Repeat("x", operations.MaxMatchBytes) + `"}`},
		"a header not kept": {Header: "X-Customer=cus_123"},
	} {
		_, err := viewer.Events(ctx, q)
		if inbox.CauseOf(err) != inbox.CauseInvalidArgument {
			t.Errorf("%s: %v (cause %s), want %s", name, err, inbox.CauseOf(err), inbox.CauseInvalidArgument)
		}
	}
}

// The quarantine through the operator API: its list and a delivery read
// the same as directly; the viewer counts a re-ingest but may not run
// one; the operator's re-ingest, confirmed by its count, stores what now
// verifies with the function's sources, and a purge deletes the rest.
func TestQuarantineThroughTheAPI(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	store := storage.New(pgtest.Pool(t))
	set, err := source.Parse([]byte(`{"sources": {"github": {"kind": "github", "secrets": ["gh-secret-client-0123456789"]}}}`))
	if err != nil {
		t.Fatal(err)
	}
	gh, _ := set.Lookup("github")
	body := []byte(`{"action":"opened","issue":{"id":9}}`)
	sr, err := sender.SignEvent(gh, body, "client-q-1", "issues", time.Now())
	if err != nil {
		t.Fatal(err)
	}
	id := factory.Quarantined(ctx, t, store, &factory.QuarantinedOpts{Source: "github", Kind: "github", Header: sr.Header, Body: body})
	factory.Quarantined(ctx, t, store, &factory.QuarantinedOpts{Source: "github", Kind: "github", Header: http.Header{"X-Hub-Signature-256": {"sha256=00"}}, Body: []byte("\x1b[31mforged")})
	sources := func(context.Context) (*source.Set, error) { return set, nil }
	direct := must[*operations.Service](t)(operations.New(operations.Config{Access: operations.AccessAct}, operations.Deps{Store: store, Sources: sources}))
	remote := operatortest.StartWithSources(t, store, nil, nil, sources)
	operator, viewer := remote.Client(t, remote.Operator), remote.Client(t, remote.Viewer)

	same(t, "quarantine", must[*operations.QuarantinePage](t)(direct.Quarantine(ctx, operations.QuarantineQuery{Source: "github"})),
		must[*operations.QuarantinePage](t)(viewer.Quarantine(ctx, operations.QuarantineQuery{Source: "github"})))
	same(t, "quarantined delivery", must[*operations.QuarantinedDetail](t)(direct.QuarantinedDelivery(ctx, id)),
		must[*operations.QuarantinedDetail](t)(viewer.QuarantinedDelivery(ctx, id)))
	if _, err := viewer.QuarantinedDelivery(ctx, 1<<40); inbox.CauseOf(err) != inbox.CauseQuarantineNotFound {
		t.Fatalf("a missing delivery: %v", err)
	}

	sel := operations.QuarantineSelection{Source: "github"}
	if dry := must[*operations.ReingestResult](t)(viewer.Reingest(ctx, operations.ReingestRequest{Select: sel, DryRun: true})); dry.Matched != 2 {
		t.Fatalf("dry run %+v", dry)
	}
	if _, err := viewer.Reingest(ctx, operations.ReingestRequest{Select: sel, Expect: new(2)}); inbox.CauseOf(err) != inbox.CauseForbidden && inbox.CauseOf(err) != inbox.CauseReadOnly {
		t.Fatalf("the viewer's re-ingest: %v", err)
	}
	res := must[*operations.ReingestResult](t)(operator.Reingest(ctx, operations.ReingestRequest{Select: sel, Expect: new(2)}))
	if res.Stored != 1 || res.Refused != 1 {
		t.Fatalf("re-ingest %+v", res)
	}
	if _, err := store.EventGetByKey(ctx, "github", "client-q-1"); err != nil {
		t.Fatal(err)
	}
	if p := must[*operations.PurgeResult](t)(operator.Purge(ctx, operations.PurgeRequest{Select: sel, Expect: new(1)})); p.Deliveries != 1 {
		t.Fatalf("purge %+v", p)
	}
	acts := must[*operations.ActionPage](t)(viewer.Actions(ctx, operations.ActionQuery{}))
	if len(acts.Actions) != 2 || acts.Actions[0].Action != inbox.ActionPurge || acts.Actions[1].Action != inbox.ActionReingest ||
		!strings.HasPrefix(acts.Actions[0].Actor, "arn:") {
		t.Fatalf("records %+v", acts.Actions)
	}
}
