package console_test

import (
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/webhook-inbox/webhook-inbox/internal/console"
	"github.com/webhook-inbox/webhook-inbox/internal/testkit/factory"
	"github.com/webhook-inbox/webhook-inbox/internal/testkit/field"
	"github.com/webhook-inbox/webhook-inbox/internal/testkit/s3test"
	"github.com/webhook-inbox/webhook-inbox/shared/archive"
	"github.com/webhook-inbox/webhook-inbox/shared/inbox"
	"github.com/webhook-inbox/webhook-inbox/shared/operations"
	"github.com/webhook-inbox/webhook-inbox/shared/storage"
)

// TestReplayCountsThenConfirms: replaying the events list's filter first
// shows how many processed events (archived ones counted apart) it resets
// and changes nothing; a stale count asks again (409); the confirmed one
// replays them, due now, recorded as the console actor's operator action.
// One event replays from its page the same way. A list filter the replay
// cannot express (a state, a time window) is refused.
func TestReplayCountsThenConfirms(t *testing.T) {
	t.Parallel()
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) {
			t.Parallel()
			testReplayCountsThenConfirms(t, b)
		})
	}
}

func testReplayCountsThenConfirms(t *testing.T, b backend) {
	f := setupWith(t, b, nil, func(c *console.Config) { c.Reason = "INC-9" })
	done := factory.Events(f.ctx, f.t, f.store, 3, &factory.EventOpts{Source: "stripe", Type: "invoice.paid", State: inbox.StateProcessed})
	factory.MarkArchived(f.ctx, f.t, f.store, "archive/stripe/0001.ndjson.gz", done[0].ID)
	factory.Event(f.ctx, f.t, f.store, &factory.EventOpts{Source: "stripe", Type: "invoice.paid", State: inbox.StateDead})
	factory.Event(f.ctx, f.t, f.store, &factory.EventOpts{Source: "stripe", Type: "invoice.paid"})
	gh := factory.Event(f.ctx, f.t, f.store, &factory.EventOpts{Source: "github", SourceKind: "github", Type: "push", State: inbox.StateProcessed})
	f.login()

	_, page := f.get("/events?source=stripe")
	if !strings.Contains(page, `id="replay-filter"`) {
		t.Fatalf("the events list offers no replay of its filter:\n%s", page)
	}
	csrf := f.csrf(page)
	code, body := f.post("/events/replay", url.Values{"csrf": {csrf}, "source": {"stripe"}}, nil)
	if code != http.StatusOK || !strings.Contains(body, "This replays <strong>3</strong> events") || !strings.Contains(body, "1 of them archived") {
		t.Fatalf("first POST = %d, want the count to confirm\n%s", code, body)
	}
	now, _ := f.store.PGNow(f.ctx)
	for _, e := range done {
		if got, _ := f.store.EventGetByID(f.ctx, e.ID); got.ProcessedAt == nil {
			t.Fatalf("the first POST replayed event %d", e.ID)
		}
	}

	// Another stripe event processed since: the count seen is stale.
	late := factory.Event(f.ctx, f.t, f.store, &factory.EventOpts{Source: "stripe", Type: "invoice.paid", State: inbox.StateProcessed})
	confirm := url.Values{"csrf": {csrf}, "source": {"stripe"}, "confirm": {"yes"}, "count": {"3"}}
	if code, body := f.post("/events/replay", confirm, nil); code != http.StatusConflict || !strings.Contains(body, "changed since you looked") ||
		!strings.Contains(body, "<strong>4</strong>") {
		t.Fatalf("stale confirmation = %d, want 409 asking again\n%s", code, body)
	}
	confirm.Set("count", "4")
	code, body = f.post("/events/replay", confirm, nil)
	if code != http.StatusOK || !strings.Contains(body, "Replayed 4 events: due now. 1 of them archived") {
		t.Fatalf("confirmed replay = %d\n%s", code, body)
	}
	now, _ = f.store.PGNow(f.ctx)
	for _, e := range append(done, late) {
		// Due again: unprocessed (an archived event keeps its archive
		// location, so it still shows as archived).
		got, err := f.store.EventGetByID(f.ctx, e.ID)
		if err != nil || got.ProcessedAt != nil || got.NextAttemptAt.After(now) {
			t.Errorf("event %d after the replay: processed %v, next attempt %v (now %v), %v; want due", e.ID, got.ProcessedAt, got.NextAttemptAt, now, err)
		}
	}
	if got, _ := f.store.EventGetByID(f.ctx, gh.ID); got.State(now) != inbox.StateProcessed {
		t.Errorf("github's event outside the filter was replayed: %v", got.State(now))
	}
	acts, err := f.store.OperatorActionList(f.ctx, time.Time{}, 10)
	if err != nil || len(acts) != 1 {
		t.Fatalf("operator actions = %+v, %v; want one", acts, err)
	}
	if !field.Check(t, "operator action",
		field.Eq("Action", acts[0].Action, inbox.ActionReplay),
		field.Eq("Actor", acts[0].Actor, f.who),
		field.Eq("Reason", acts[0].Reason, "INC-9"),
		field.Eq("Events", acts[0].Events, 4),
		field.Is("Filter", string(acts[0].Filter), strings.Contains(strings.ReplaceAll(string(acts[0].Filter), " ", ""), `"source":"stripe"`), "source stripe"),
	) {
		t.FailNow()
	}

	// One event, from its page.
	_, page = f.get("/events/" + itoa(gh.ID))
	if !strings.Contains(page, `id="replay"`) {
		t.Fatalf("a processed event's page offers no replay:\n%s", page)
	}
	one := url.Values{"csrf": {csrf}, "id": {itoa(gh.ID)}}
	if code, body := f.post("/events/replay", one, nil); code != http.StatusOK || !strings.Contains(body, "This replays <strong>1</strong> event:") {
		t.Fatalf("one event, first POST = %d\n%s", code, body)
	}
	one.Set("confirm", "yes")
	one.Set("count", "1")
	if code, body := f.post("/events/replay", one, nil); code != http.StatusOK || !strings.Contains(body, "Replayed 1 event: due now.") ||
		!strings.Contains(body, `id="event-id"`) {
		t.Fatalf("one event, confirmed = %d, want its page saying it was replayed\n%s", code, body)
	}
	if got, _ := f.store.EventGetByID(f.ctx, gh.ID); got.State(now) != inbox.StatePending {
		t.Errorf("the replayed event is %v, want pending", got.State(now))
	}

	// Filters a replay cannot take are refused, changing nothing.
	for _, bad := range []url.Values{
		{"csrf": {csrf}, "source": {"github"}, "state": {"processed"}, "confirm": {"yes"}, "count": {"0"}},
		{"csrf": {csrf}, "source": {"github"}, "since": {"1h"}},
		{"csrf": {csrf}},
		{"csrf": {csrf}, "id": {"x"}},
	} {
		if code, body := f.post("/events/replay", bad, nil); code != http.StatusBadRequest {
			t.Errorf("replay of %v = %d, want 400\n%s", bad, code, body)
		}
	}
	if _, page := f.get("/events?source=stripe&state=processed"); strings.Contains(page, `id="replay-filter"`) {
		t.Errorf("the list offers to replay a filter with a state")
	}
}

// expungeSetup: a console over b with the archive's settings (a real S3
// server) and an event archived there, with a dead letter's history
// before.
func expungeSetup(t *testing.T, b backend) (*fixture, *inbox.Event) {
	t.Helper()
	arch := newTestArchive(t, s3test.Bucket, s3test.Server(t))
	f := setupWith(t, b, arch, nil)
	hourAgo := time.Now().Add(-time.Hour)
	e := factory.Event(f.ctx, f.t, f.store, &factory.EventOpts{Source: "stripe", EventID: "evt_private_1", Type: "customer.updated",
		Body: []byte(`{"email":"jane@example.com"}`), Metadata: map[string]string{"ip": "192.0.2.7"},
		State: inbox.StateProcessed, Now: hourAgo, CreatedAt: hourAgo.Add(-time.Minute), ProcessedAt: &hourAgo})
	archiveNow(t, f.store, arch, 1)
	return f, e
}

// archiveNow runs the archiver once on arch, as the archiver function
// does, and checks it archived n events.
func archiveNow(t *testing.T, store *storage.Store, arch *testArchive, n int) {
	t.Helper()
	a, err := archive.New(arch.cfg, archive.Deps{Store: store, Blobs: arch.blobs})
	if err != nil {
		t.Fatal(err)
	}
	if res, err := a.RunOnce(t.Context()); err != nil || res.Events != n {
		t.Fatalf("archive run = %+v, %v; want %d events archived", res, err, n)
	}
}

// TestExpungeNeedsTheEventIDTyped: the expunge's first POST says what it
// erases and changes nothing; a mistyped event id erases nothing (409);
// the exact id expunges the event in Postgres and in its archive object,
// shows the report and what expunge cannot reach, and is recorded.
func TestExpungeNeedsTheEventIDTyped(t *testing.T) {
	t.Parallel()
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) {
			t.Parallel()
			testExpungeNeedsTheEventIDTyped(t, b)
		})
	}
}

func testExpungeNeedsTheEventIDTyped(t *testing.T, b backend) {
	f, e := expungeSetup(t, b)
	f.login()
	_, page := f.get("/events/" + itoa(e.ID))
	if !strings.Contains(page, `id="expunge"`) {
		t.Fatalf("the event page offers no expunge:\n%s", page)
	}
	csrf := f.csrf(page)
	path := "/events/" + itoa(e.ID) + "/expunge"
	code, body := f.post(path, url.Values{"csrf": {csrf}}, nil)
	if code != http.StatusOK || !strings.Contains(body, "irreversibly") || !strings.Contains(body, "Type the event id") ||
		!strings.Contains(body, "database backups") {
		t.Fatalf("first POST = %d, want what it erases and a field to type the id\n%s", code, body)
	}
	for _, typed := range []string{"", "evt_private", "EVT_PRIVATE_1", itoa(e.ID)} {
		code, body := f.post(path, url.Values{"csrf": {csrf}, "confirm_event_id": {typed}}, nil)
		if code != http.StatusConflict || !strings.Contains(body, "not this event") {
			t.Errorf("typed %q = %d, want 409\n%s", typed, code, body)
		}
	}
	if got, _ := f.store.EventGetByID(f.ctx, e.ID); got.ExpungedAt != nil || got.Metadata == nil {
		t.Fatalf("a refused expunge erased the event: %+v", got)
	}

	code, body = f.post(path, url.Values{"csrf": {csrf}, "confirm_event_id": {"evt_private_1"}}, nil)
	if code != http.StatusOK || !strings.Contains(body, `id="expunged"`) || !strings.Contains(body, "archived body in") ||
		!strings.Contains(body, "metadata: erased") || !strings.Contains(body, "handlers&#39; own tables") {
		t.Fatalf("confirmed expunge = %d, want its report\n%s", code, body)
	}
	got, err := f.store.EventGetByID(f.ctx, e.ID)
	if err != nil {
		t.Fatalf("after the expunge: %v", err)
	}
	if !field.Check(t, "after the expunge",
		field.Is("ExpungedAt", got.ExpungedAt, got.ExpungedAt != nil, "set"),
		field.Is("Metadata", got.Metadata, got.Metadata == nil, "nil"),
		field.Is("Body", string(got.Body), got.Body == nil, "nil"),
	) {
		t.FailNow()
	}
	acts, err := f.store.OperatorActionListByEvent(f.ctx, e.ID)
	if err != nil || len(acts) != 1 {
		t.Fatalf("operator actions of the event = %+v, %v; want one", acts, err)
	}
	if !field.Check(t, "operator action of the event",
		field.Eq("Action", acts[0].Action, inbox.ActionExpunge),
		field.Eq("Actor", acts[0].Actor, f.who),
	) {
		t.FailNow()
	}
	_, page = f.get("/events/" + itoa(e.ID))
	if strings.Contains(page, `id="expunge"`) || !strings.Contains(page, "expunged") {
		t.Errorf("the expunged event's page still offers an expunge:\n%s", page)
	}
}

// TestExpungeWithoutArchiveSettings: without the archive's settings the
// console cannot reach the bucket, so it refuses to expunge and says why.
func TestExpungeWithoutArchiveSettings(t *testing.T) {
	t.Parallel()
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) {
			t.Parallel()
			testExpungeWithoutArchiveSettings(t, b)
		})
	}
}

func testExpungeWithoutArchiveSettings(t *testing.T, b backend) {
	f := setupWith(t, b, nil, nil)
	e := factory.Event(f.ctx, f.t, f.store, &factory.EventOpts{EventID: "evt_x", State: inbox.StateProcessed})
	f.login()
	_, page := f.get("/events/" + itoa(e.ID))
	code, body := f.post("/events/"+itoa(e.ID)+"/expunge", url.Values{"csrf": {f.csrf(page)}, "confirm_event_id": {"evt_x"}}, nil)
	if code != http.StatusServiceUnavailable || !strings.Contains(body, "ARCHIVE_BUCKET") {
		t.Fatalf("expunge without archive settings = %d\n%s", code, body)
	}
	if got, _ := f.store.EventGetByID(f.ctx, e.ID); got.ExpungedAt != nil || got.Body == nil {
		t.Fatalf("erased without archive settings: %+v", got)
	}
}

// TestReplayAndExpungeRefusedCrossSiteOrWithoutCSRF: as the requeue's, a
// replay or an expunge from another origin, without the session's CSRF
// token, or on a read-only console is refused and changes nothing.
func TestReplayAndExpungeRefusedCrossSiteOrWithoutCSRF(t *testing.T) {
	t.Parallel()
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) {
			t.Parallel()
			testReplayAndExpungeRefusedCrossSiteOrWithoutCSRF(t, b)
		})
	}
}

func testReplayAndExpungeRefusedCrossSiteOrWithoutCSRF(t *testing.T, b backend) {
	f, e := expungeSetup(t, b)
	f.login()
	_, page := f.get("/events/" + itoa(e.ID))
	csrf := f.csrf(page)
	actions := map[string]url.Values{
		"/events/replay":                     {"csrf": {csrf}, "id": {itoa(e.ID)}, "confirm": {"yes"}, "count": {"1"}},
		"/events/" + itoa(e.ID) + "/expunge": {"csrf": {csrf}, "confirm_event_id": {"evt_private_1"}},
	}
	for path, form := range actions {
		noCSRF := url.Values{}
		for k, v := range form {
			if k != "csrf" {
				noCSRF[k] = v
			}
		}
		other := url.Values{}
		for k, v := range form {
			other[k] = v
		}
		other.Set("csrf", "bm90LXRoaXMtc2Vzc2lvbg")
		for name, c := range map[string]struct {
			form    url.Values
			headers map[string]string
		}{
			"another site's Origin":   {form, map[string]string{"Origin": "https://evil.example", "Sec-Fetch-Site": ""}},
			"cross-site fetch":        {form, map[string]string{"Sec-Fetch-Site": "cross-site"}},
			"same-site, other origin": {form, map[string]string{"Sec-Fetch-Site": "same-site", "Origin": "http://127.0.0.1:1"}},
			"no CSRF token":           {noCSRF, nil},
			"another session's token": {other, nil},
		} {
			if code, body := f.post(path, c.form, c.headers); code != http.StatusForbidden {
				t.Errorf("%s %s: %d, want 403\n%s", path, name, code, body)
			}
		}
	}
	got, err := f.store.EventGetByID(f.ctx, e.ID)
	if err != nil || got.ExpungedAt != nil || got.ProcessedAt == nil {
		t.Fatalf("the refused actions changed the event: %+v, %v", got, err)
	}
	if acts, _ := f.store.OperatorActionList(f.ctx, time.Time{}, 10); len(acts) != 0 {
		t.Fatalf("refused actions recorded: %+v", acts)
	}

	ro := setupWith(t, b, nil, func(c *console.Config) { c.ReadOnly = true; c.Operator = operations.Operator{} })
	re := factory.Event(ro.ctx, ro.t, ro.store, &factory.EventOpts{EventID: "evt_ro", State: inbox.StateProcessed})
	ro.login()
	for _, p := range []string{"/events/" + itoa(re.ID), "/events"} {
		if _, page := ro.get(p); strings.Contains(page, "Replay") || strings.Contains(page, "Expunge") || strings.Contains(page, `method="post"`) {
			t.Errorf("a read-only console shows actions on %s:\n%s", p, page)
		}
	}
	for path, form := range map[string]url.Values{
		"/events/replay":                      {"id": {itoa(re.ID)}, "confirm": {"yes"}, "count": {"1"}},
		"/events/" + itoa(re.ID) + "/expunge": {"confirm_event_id": {"evt_ro"}},
	} {
		if code, body := ro.post(path, form, nil); code != http.StatusForbidden || !strings.Contains(body, "read-only") {
			t.Errorf("read-only %s = %d %q, want 403 saying read-only", path, code, body)
		}
	}
	if got, _ := ro.store.EventGetByID(ro.ctx, re.ID); got.ProcessedAt == nil || got.ExpungedAt != nil {
		t.Errorf("a read-only console changed the event: %+v", got)
	}
}

var rowRE = regexp.MustCompile(`<tr><td class="num">(\d+)</td>`)

// rows returns the first column (the id) of a list page's rows.
func rows(page string) []string {
	var ids []string
	for _, m := range rowRE.FindAllStringSubmatch(page, -1) {
		ids = append(ids, m[1])
	}
	return ids
}

// nextPage follows the page's next link; "" when there is none.
func (f *fixture) nextPage(page string) string {
	f.t.Helper()
	m := regexp.MustCompile(`id="next" href="([^"]+)"`).FindStringSubmatch(page)
	if m == nil {
		return ""
	}
	code, next := f.get(strings.ReplaceAll(m[1], "&amp;", "&"))
	if code != http.StatusOK {
		f.t.Fatalf("next page %s = %d\n%s", m[1], code, next)
	}
	return next
}

// TestDeadLettersAndActionsPage: both lists page by cursor, 50 a page;
// rows that arrive, or leave, between pages neither repeat nor hide one.
func TestDeadLettersAndActionsPage(t *testing.T) {
	t.Parallel()
	f := setup(t, nil)
	var dls []int64
	for range 53 {
		_, dl := f.deadLetter("stripe", "invoice.paid")
		dls = append(dls, dl)
	}
	f.login()
	_, page := f.get("/dead-letters")
	first := rows(page)
	if len(first) != 50 || first[0] != itoa(dls[0]) || first[49] != itoa(dls[49]) {
		t.Fatalf("first page of dead letters: %v", first)
	}
	// Between pages: one of the next page is requeued, a new one dies.
	if n, err := f.store.DeadLetterRequeue(f.ctx, storage.DeadLetterFilter{ID: dls[51]}, storage.BulkOptions{Now: time.Now(), By: inbox.Actor{Name: "bob"}}); err != nil || n.Done != 1 {
		t.Fatalf("requeue = %d, %v", n.Done, err)
	}
	_, late := f.deadLetter("stripe", "invoice.paid")
	second := rows(f.nextPage(page))
	if want := []string{itoa(dls[50]), itoa(dls[52]), itoa(late)}; !slices.Equal(second, want) {
		t.Errorf("second page of dead letters = %v, want %v", second, want)
	}
	// The filter stays on the next page's address.
	f.deadLetter("github", "push")
	_, page = f.get("/dead-letters?source=stripe")
	if next := regexp.MustCompile(`id="next" href="([^"]+)"`).FindStringSubmatch(page); next == nil || !strings.Contains(next[1], "source=stripe") {
		t.Errorf("filtered next link: %v", next)
	}
	if code, _ := f.get("/dead-letters?after=x"); code != http.StatusBadRequest {
		t.Errorf("after=x = %d, want 400", code)
	}

	var acts []int64
	for i := range 52 {
		id, err := f.store.OperatorActionRecord(f.ctx, inbox.ActionExpunge, inbox.Actor{Name: "ops" + strconv.Itoa(i)}, nil, nil)
		if err != nil {
			t.Fatal(err)
		}
		acts = append(acts, id)
	}
	_, page = f.get("/actions")
	first = rows(page)
	// The newest first: the 52 recorded here, after the requeue above.
	if len(first) != 50 || first[0] != itoa(acts[51]) || first[49] != itoa(acts[2]) {
		t.Fatalf("first page of actions: %v", first)
	}
	if _, err := f.store.OperatorActionRecord(f.ctx, inbox.ActionExpunge, inbox.Actor{Name: "late"}, nil, nil); err != nil {
		t.Fatal(err)
	}
	next := f.nextPage(page)
	if second := rows(next); len(second) != 3 || second[0] != itoa(acts[1]) || second[1] != itoa(acts[0]) || f.nextPage(next) != "" {
		t.Errorf("second page of actions = %v, want %d, %d and the requeue, the last page", second, acts[1], acts[0])
	}
	if code, _ := f.get("/actions?before=0"); code != http.StatusBadRequest {
		t.Errorf("before=0 = %d, want 400", code)
	}
}

// TestReplayLargerThanOneCall: a replay of more events than one call of
// the API resets (operations.ReplayPerCall) goes on within the confirmed
// POST until every event is due, under one record counting them all.
func TestReplayLargerThanOneCall(t *testing.T) {
	t.Parallel()
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) {
			t.Parallel()
			testReplayLargerThanOneCall(t, b)
		})
	}
}

func testReplayLargerThanOneCall(t *testing.T, b backend) {
	f := setupWith(t, b, nil, nil)
	const n = operations.ReplayPerCall + 3
	one := factory.Event(f.ctx, t, f.store, &factory.EventOpts{Source: "stripe", Type: "invoice.paid", State: inbox.StateProcessed})
	// Its copies, in one statement: the factory stores one at a time.
	if _, err := f.pool.Exec(f.ctx, `
		INSERT INTO webhook_events (provider, source_kind, event_id, event_type, payload, body, body_sha256, body_size, metadata,
		       created_at, attempts, failed_attempts, solo, last_attempt_at, next_attempt_at, last_error, outcome, processed_at)
		SELECT provider, source_kind, event_id || '-' || g, event_type, payload, body, body_sha256, body_size, metadata,
		       created_at, attempts, failed_attempts, solo, last_attempt_at, next_attempt_at, last_error, outcome, processed_at
		  FROM webhook_events, generate_series(1, $2::int) g WHERE id = $1`, one.ID, n-1); err != nil {
		t.Fatal(err)
	}
	f.login()
	_, page := f.get("/events?source=stripe")
	csrf := f.csrf(page)
	if code, body := f.post("/events/replay", url.Values{"csrf": {csrf}, "source": {"stripe"}}, nil); code != http.StatusOK ||
		!strings.Contains(body, "This replays <strong>"+strconv.Itoa(n)+"</strong> events") {
		t.Fatalf("first POST = %d, want %d to confirm\n%s", code, n, body)
	}
	confirm := url.Values{"csrf": {csrf}, "source": {"stripe"}, "confirm": {"yes"}, "count": {strconv.Itoa(n)}}
	if code, body := f.post("/events/replay", confirm, nil); code != http.StatusOK || !strings.Contains(body, "Replayed "+strconv.Itoa(n)+" events: due now.") {
		t.Fatalf("confirmed replay = %d, want all %d replayed\n%s", code, n, body)
	}
	var left int
	if err := f.pool.QueryRow(f.ctx, `SELECT count(*) FROM webhook_events WHERE processed_at IS NOT NULL`).Scan(&left); err != nil || left != 0 {
		t.Errorf("%d events still processed after the replay (%v), want 0", left, err)
	}
	acts, err := f.store.OperatorActionList(f.ctx, time.Time{}, 10)
	if err != nil || len(acts) != 1 {
		t.Fatalf("operator actions = %+v, %v; want one replay of %d events", acts, err, n)
	}
	if !field.Check(t, "operator action",
		field.Eq("Action", acts[0].Action, inbox.ActionReplay),
		field.Eq("Events", acts[0].Events, n),
	) {
		t.FailNow()
	}
}
