package main

import (
	"bytes"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/webhook-inbox/webhook-inbox/internal/testkit/factory"
	"github.com/webhook-inbox/webhook-inbox/internal/testkit/field"
	"github.com/webhook-inbox/webhook-inbox/shared/inbox"
	"github.com/webhook-inbox/webhook-inbox/shared/operations"
)

type eventsListJSON = operations.EventPage

func listIDs(l eventsListJSON) []int64 {
	ids := make([]int64, len(l.Events))
	for i, e := range l.Events {
		ids[i] = e.ID
	}
	return ids
}

func TestEventsList(t *testing.T) {
	t.Parallel()
	f := newOpsFixture(t)
	ids := f.populate()
	// One event received three hours ago: the time window is on the
	// receipt.
	ids["old"] = factory.Event(f.ctx, t, f.store, &factory.EventOpts{Source: "stripe", EventID: "evt_old", Type: "old",
		CreatedAt: time.Now().Add(-3 * time.Hour)}).ID

	var all eventsListJSON
	f.runJSON(&all, "events", "list")
	if len(all.Events) != 10 || all.NextBefore != nil {
		t.Fatalf("all events = %+v", all)
	}
	if !slices.IsSortedFunc(all.Events, func(a, b operations.Event) int { return int(b.ID - a.ID) }) {
		t.Fatalf("not newest first: %v", listIDs(all))
	}
	want := map[int64]inbox.EventState{
		ids["ok1"]: inbox.StateProcessed, ids["unhandled"]: inbox.StateProcessed, ids["poison1"]: inbox.StateDead,
		ids["flaky"]: inbox.StateRetrying, ids["inflight"]: inbox.StateInFlight, ids["pending"]: inbox.StatePending,
	}
	for _, e := range all.Events {
		if w, ok := want[e.ID]; ok && e.State != w {
			t.Errorf("event %d (%s) state = %s, want %s", e.ID, e.EventID, e.State, w)
		}
	}
	// Each state filter selects exactly the events listed in that state.
	for _, st := range inbox.EventStates() {
		var l eventsListJSON
		f.runJSON(&l, "events", "list", "--state", string(st))
		var expect []int64
		for _, e := range all.Events {
			if e.State == st {
				expect = append(expect, e.ID)
			}
		}
		if got := listIDs(l); !slices.Equal(got, expect) {
			t.Errorf("--state %s = %v, want %v", st, got, expect)
		}
	}
	for _, tc := range []struct {
		args []string
		want int
	}{
		{[]string{"--state", "dead", "--source", "github"}, 1},
		{[]string{"--type", "ok"}, 4},
		{[]string{"--source", "stripe", "--type", "poison"}, 2},
		{[]string{"--source", "nope"}, 0},
	} {
		var l eventsListJSON
		f.runJSON(&l, append([]string{"events", "list"}, tc.args...)...)
		if len(l.Events) != tc.want {
			t.Errorf("%v: %d events, want %d", tc.args, len(l.Events), tc.want)
		}
	}

	// Unhandled and handled are outcomes of processed events.
	for _, e := range all.Events {
		if e.ID == ids["unhandled"] {
			field.Check(t, "unhandled event",
				field.Is("Outcome", e.Outcome, e.Outcome != nil && *e.Outcome == string(inbox.OutcomeUnhandled), string(inbox.OutcomeUnhandled)),
				field.Is("ProcessedAt", e.ProcessedAt, e.ProcessedAt != nil, "set"),
				field.Eq("NextAttemptAt", e.NextAttemptAt, nil),
			)
		}
		if e.ID == ids["flaky"] {
			field.Check(t, "retrying event",
				field.Eq("Attempts", e.Attempts, 1),
				field.Is("LastError", e.LastError, e.LastError != nil, "set"),
				field.Is("NextAttemptAt", e.NextAttemptAt, e.NextAttemptAt != nil, "set"),
			)
		}
	}

	// The time window is on the receipt.
	var recent, old, between eventsListJSON
	f.runJSON(&recent, "events", "list", "--since", "1h")
	hourAgo := time.Now().Add(-time.Hour).UTC().Format(time.RFC3339)
	f.runJSON(&old, "events", "list", "--to", hourAgo)
	f.runJSON(&between, "events", "list", "--from", time.Now().Add(-4*time.Hour).UTC().Format(time.RFC3339), "--to", hourAgo)
	if len(recent.Events) != 9 || slices.Contains(listIDs(recent), ids["old"]) ||
		!slices.Equal(listIDs(old), []int64{ids["old"]}) || !slices.Equal(listIDs(between), []int64{ids["old"]}) {
		t.Errorf("windows: since 1h %v, to -1h %v, between %v", listIDs(recent), listIDs(old), listIDs(between))
	}

	// Paging: pages of 4 make up the whole list.
	var paged []int64
	args := []string{"events", "list", "--limit", "4"}
	for range 5 {
		var page eventsListJSON
		f.runJSON(&page, args...)
		paged = append(paged, listIDs(page)...)
		if page.NextBefore == nil {
			break
		}
		args = []string{"events", "list", "--limit", "4", "--before", strconv.FormatInt(*page.NextBefore, 10)}
	}
	if !slices.Equal(paged, listIDs(all)) {
		t.Errorf("pages = %v, want %v", paged, listIDs(all))
	}

	human := f.runOK("events", "list", "--limit", "4")
	for _, want := range []string{"ID", "SOURCE", "STATE", "evt_pending", "in_flight", "retrying", "(more: --before"} {
		if !strings.Contains(human, want) {
			t.Errorf("events list lacks %q:\n%s", want, human)
		}
	}
	if out := f.runOK("events", "list", "--source", "nope"); !strings.Contains(out, "no events match") {
		t.Errorf("empty list:\n%s", out)
	}
	for _, bad := range [][]string{
		{"--state", "stuck"}, {"--since", "1h", "--from", "2026-01-01"}, {"--from", "yesterday"},
		{"--from", "2026-02-01", "--to", "2026-01-01"}, {"--limit", "0"},
	} {
		if _, _, err := f.run(append([]string{"events", "list"}, bad...)...); err == nil {
			t.Errorf("%v accepted", bad)
		}
	}
}

type eventShowOut = eventView

func TestEventsShow(t *testing.T) {
	t.Parallel()
	f := newOpsFixture(t)
	ids := f.populate()

	var dead eventShowOut
	f.runJSON(&dead, "events", "show", strconv.FormatInt(ids["poison1"], 10))
	if len(dead.History) != 1 || len(dead.DeadLetters) != 1 {
		t.Fatalf("dead event: %d attempts, %d dead letters, want 1 each: %+v", len(dead.History), len(dead.DeadLetters), dead)
	}
	h := dead.History[0]
	if !field.Check(t, "dead event",
		field.Eq("ID", dead.ID, ids["poison1"]),
		field.Eq("State", dead.State, "dead"),
		field.Eq("SourceKind", dead.SourceKind, "stripe"),
		field.Eq("Attempts", dead.Attempts, 1),
		field.Is("History[0].Cause", h.Cause, h.Cause != nil && *h.Cause == "permanent_error", "permanent_error"),
		field.Eq("History[0].Dead", h.Dead, true),
		field.Is("History[0].Error", h.Error, h.Error != nil && strings.Contains(*h.Error, "cannot decode"), `"cannot decode" in it`),
		field.Eq("DeadLetters[0].RequeuedAt", dead.DeadLetters[0].RequeuedAt, nil),
		field.Is("DeadAt", dead.DeadAt, dead.DeadAt != nil, "set"),
		field.Is("Body", dead.Body, dead.Body != nil && *dead.Body == `{"id":"evt_poison_1","type":"poison"}`, `{"id":"evt_poison_1","type":"poison"}`),
		field.Eq("BodyFrom", dead.BodyFrom, "postgres"),
		field.Is("BodySHA256", dead.BodySHA256, len(dead.BodySHA256) == 64, "64 hex digits"),
	) {
		t.FailNow()
	}
	// By source and event id: the same event.
	var byKey eventShowOut
	f.runJSON(&byKey, "events", "show", "stripe", "evt_poison_1")
	if byKey.ID != dead.ID {
		t.Fatalf("by key = %d, want %d", byKey.ID, dead.ID)
	}
	var retrying, mismatched eventShowOut
	f.runJSON(&retrying, "events", "show", strconv.FormatInt(ids["flaky"], 10), "--no-body")
	if len(retrying.History) != 1 {
		t.Fatalf("retrying event: %d attempts, want 1: %+v", len(retrying.History), retrying)
	}
	if !field.Check(t, "retrying event",
		field.Eq("State", retrying.State, "retrying"),
		field.Eq("History[0].Cause", *retrying.History[0].Cause, "handler_failed"),
		field.Eq("FailedAttempts", retrying.FailedAttempts, 1),
		field.Is("NextAttemptAt", retrying.NextAttemptAt, retrying.NextAttemptAt != nil, "set"),
		field.Eq("Body", retrying.Body, nil),
		field.Eq("BodyFrom", retrying.BodyFrom, ""),
	) {
		t.FailNow()
	}
	f.runJSON(&mismatched, "events", "show", "stripe", "evt_ok_1")
	if len(mismatched.Mismatches) != 1 {
		t.Fatalf("mismatched event: %d mismatch records, want 1: %+v", len(mismatched.Mismatches), mismatched)
	}
	if !field.Check(t, "mismatched event",
		field.Eq("Mismatches[0].ReceivedSize", mismatched.Mismatches[0].ReceivedSize, 12),
		field.Is("Outcome", mismatched.Outcome, mismatched.Outcome != nil && *mismatched.Outcome == "handled", "handled"),
	) {
		t.FailNow()
	}
	var inflight eventShowOut
	f.runJSON(&inflight, "events", "show", strconv.FormatInt(ids["inflight"], 10))
	if !field.Check(t, "in-flight event",
		field.Eq("State", inflight.State, "in_flight"),
		field.Is("ClaimedBy", inflight.ClaimedBy, inflight.ClaimedBy != nil && *inflight.ClaimedBy == "test-processor/1", "test-processor/1"),
		field.Is("ClaimedUntil", inflight.ClaimedUntil, inflight.ClaimedUntil != nil, "set"),
	) {
		t.FailNow()
	}

	human := f.runOK("events", "show", strconv.FormatInt(ids["poison1"], 10))
	for _, want := range []string{"EVENT " + strconv.FormatInt(ids["poison1"], 10), "stripe/evt_poison_1", "state", "dead",
		"HISTORY", "failed, dead", "permanent_error", "DEAD LETTERS", "BODY (37 bytes from postgres", `{"id":"evt_poison_1","type":"poison"}`} {
		if !strings.Contains(human, want) {
			t.Errorf("events show lacks %q:\n%s", want, human)
		}
	}

	// A body that is not UTF-8 text, with an escape sequence: JSON gives
	// it in base64, --body-out byte for byte, and the human output never
	// sends the sender's control characters to the terminal.
	raw := []byte("\x1b[2J\xff\xfe binary")
	bin := f.insertBody("github", "gh_bin", "blob", raw)
	var b eventShowOut
	f.runJSON(&b, "events", "show", strconv.FormatInt(bin, 10))
	if b.Body != nil || !bytes.Equal(b.BodyBase64, raw) {
		t.Fatalf("binary body = %+v", b)
	}
	if out := f.runOK("events", "show", strconv.FormatInt(bin, 10), "--body-out", "-"); out != string(raw) {
		t.Fatalf("--body-out - = %q", out)
	}
	file := filepath.Join(t.TempDir(), "body")
	f.runOK("events", "show", strconv.FormatInt(bin, 10), "--body-out", file)
	if got, err := os.ReadFile(file); err != nil || !bytes.Equal(got, raw) {
		t.Fatalf("--body-out file = %q, %v", got, err)
	}
	esc := f.insertBody("github", "gh_esc", "blob", []byte("text \x1b]0;pwned\x07 end"))
	if out := f.runOK("events", "show", strconv.FormatInt(esc, 10)); strings.ContainsAny(out, "\x1b\x07") || !strings.Contains(out, "end") {
		t.Fatalf("control characters reached the terminal: %q", out)
	}
	if out := f.runOK("events", "show", strconv.FormatInt(bin, 10)); strings.Contains(out, "\x1b") || !strings.Contains(out, "not UTF-8") {
		t.Fatalf("binary body printed: %q", out)
	}

	for _, args := range [][]string{{"999999"}, {"stripe", "evt_none"}, {"abc"}, {"0"}} {
		if _, _, err := f.run(append([]string{"events", "show"}, args...)...); err == nil {
			t.Errorf("events show %v succeeded", args)
		}
	}
}

// TestEventsShowArchivedBody: an archived event's body comes back from its
// S3 object (versitygw), byte for byte; without the archive's settings the
// command says which are missing.
func TestEventsShowArchivedBody(t *testing.T) {
	t.Parallel()
	f := newOpsFixture(t)
	f.withArchive()
	body := []byte(`{"id":"evt_arch","type":"ok","data":{"amount":4200,"note":"archived and back"}}`)
	id := f.insertBody("stripe", "evt_arch", "ok", body)
	f.insert("stripe", "evt_arch_2", "ok")
	f.drain(nil)
	var run operations.ArchiveRunResult
	f.runJSON(&run, "archive", "run", "--min-age", "1ms")
	if run.Events != 2 || run.Objects != 1 {
		t.Fatalf("archive run = %+v", run)
	}

	var e eventShowOut
	f.runJSON(&e, "events", "show", strconv.FormatInt(id, 10))
	if !field.Check(t, "archived event",
		field.Eq("State", e.State, "archived"),
		field.Is("ArchiveKey", e.ArchiveKey, e.ArchiveKey != nil && strings.HasPrefix(*e.ArchiveKey, "archive/provider=stripe/"), "under archive/provider=stripe/"),
		field.Eq("BodyFrom", e.BodyFrom, "archive"),
		field.Is("Body", e.Body, e.Body != nil && *e.Body == string(body), "the body sent"),
		field.Eq("BodyError", e.BodyError, ""),
	) {
		t.FailNow()
	}
	if out := f.runOK("events", "show", "stripe", "evt_arch"); !strings.Contains(out, "from the archive, "+*e.ArchiveKey) || !strings.Contains(out, "archived and back") {
		t.Fatalf("events show:\n%s", out)
	}
	if out := f.runOK("events", "show", "stripe", "evt_arch", "--body-out", "-"); out != string(body) {
		t.Fatalf("--body-out - = %q", out)
	}

	delete(f.env, "ARCHIVE_BUCKET")
	out, _, err := f.run("events", "show", strconv.FormatInt(id, 10), "--json")
	if err == nil || !strings.Contains(err.Error(), "ARCHIVE_BUCKET") || !strings.Contains(out, `"body_error"`) {
		t.Fatalf("without the archive's settings: %v\n%s", err, out)
	}
	// The metadata needs no S3.
	f.runOK("events", "show", strconv.FormatInt(id, 10), "--no-body")
}

// TestEventsShowSuspectedReplays: an event's suspected replays (its body
// posted under other ids) are listed apart from its changed redeliveries,
// with the id and type they were posted under.
func TestEventsShowSuspectedReplays(t *testing.T) {
	t.Parallel()
	f := newOpsFixture(t)
	f.populate()
	sum := make([]byte, 32)
	if _, err := f.store.PayloadMismatchInsert(f.ctx, inbox.PayloadMismatch{Source: "stripe", EventID: "evt_ok_1", Cause: inbox.CauseSuspectedReplay,
		StoredSHA256: sum, ReceivedSHA256: sum, ReceivedSize: 40, ReceivedEventID: "evt_replayed_9", ReceivedEventType: "push"}); err != nil {
		t.Fatal(err)
	}
	var ev eventShowOut
	f.runJSON(&ev, "events", "show", "stripe", "evt_ok_1")
	if len(ev.Mismatches) != 2 {
		t.Fatalf("records = %+v, want 2", ev.Mismatches)
	}
	if !field.Check(t, "records",
		field.Eq("[1].Cause", ev.Mismatches[1].Cause, "suspected_replay"),
		field.Eq("[1].ReceivedEventID", ev.Mismatches[1].ReceivedEventID, "evt_replayed_9"),
		field.Eq("[1].ReceivedEventType", ev.Mismatches[1].ReceivedEventType, "push"),
		field.Eq("[0].Cause", ev.Mismatches[0].Cause, "payload_mismatch"),
	) {
		t.FailNow()
	}
	human := f.runOK("events", "show", "stripe", "evt_ok_1")
	for _, want := range []string{"REDELIVERIES WITH A DIFFERENT BODY", "SUSPECTED REPLAYS", "evt_replayed_9", "push"} {
		if !strings.Contains(human, want) {
			t.Errorf("events show lacks %q:\n%s", want, human)
		}
	}
}

// TestEventsListPagesPastOneAPIPage: the API answers at most
// operations.MaxLimit events a call; a --limit beyond that is served page
// after page (NextBefore), every event once, newest first, and the cursor
// printed is where the list stopped.
func TestEventsListPagesPastOneAPIPage(t *testing.T) {
	t.Parallel()
	f := newOpsFixture(t)
	n := operations.MaxLimit + 3
	evs := factory.Events(f.ctx, t, f.store, n, &factory.EventOpts{Source: "stripe", EventID: "evt_page_", Type: "ok"})
	newest := make([]int64, n)
	for i, e := range evs {
		newest[n-1-i] = e.ID
	}

	var most eventsListJSON
	f.runJSON(&most, "events", "list", "--limit", strconv.Itoa(n-1))
	if got := listIDs(most); !slices.Equal(got, newest[:n-1]) || most.NextBefore == nil || *most.NextBefore != newest[n-2] {
		t.Fatalf("--limit %d: %d events (first %v), next_before %v; want the %d newest, next_before %d",
			n-1, len(got), got[:min(3, len(got))], most.NextBefore, n-1, newest[n-2])
	}
	var rest eventsListJSON
	f.runJSON(&rest, "events", "list", "--before", strconv.FormatInt(*most.NextBefore, 10))
	if got := listIDs(rest); !slices.Equal(got, newest[n-1:]) || rest.NextBefore != nil {
		t.Fatalf("the page after: %v, next_before %v; want %v", got, rest.NextBefore, newest[n-1:])
	}
	// A limit past the end: every event, and no cursor.
	var all eventsListJSON
	f.runJSON(&all, "events", "list", "--limit", strconv.Itoa(maxListLimit))
	if got := listIDs(all); !slices.Equal(got, newest) || all.NextBefore != nil {
		t.Fatalf("--limit %d: %d events, next_before %v; want all %d", maxListLimit, len(got), all.NextBefore, n)
	}
	if human := f.runOK("events", "list", "--limit", strconv.Itoa(n-1)); strings.Count(human, "evt_page_") != n-1 ||
		!strings.Contains(human, "(more: --before "+strconv.FormatInt(newest[n-2], 10)+")") {
		t.Fatalf("the table of %d events lacks some, or the cursor:\n%s", n-1, human[max(0, len(human)-300):])
	}
	if _, _, err := f.run("events", "list", "--limit", strconv.Itoa(maxListLimit+1)); err == nil {
		t.Fatalf("--limit %d accepted", maxListLimit+1)
	}
}

// TestEventsShowJSONIsFlat: events show --json keeps the event's fields at
// the top level beside its lists and body, as scripts read it.
func TestEventsShowJSONIsFlat(t *testing.T) {
	t.Parallel()
	f := newOpsFixture(t)
	ids := f.populate()
	var m map[string]any
	f.runJSON(&m, "events", "show", strconv.FormatInt(ids["poison1"], 10))
	for _, k := range []string{"id", "source", "event_id", "type", "state", "attempts", "failed_attempts", "received_at", "dead_at",
		"last_error", "body_size", "body_sha256", "metadata", "archive_key", "history", "actions", "dead_letters", "payload_mismatches",
		"body", "body_from"} {
		if _, ok := m[k]; !ok {
			t.Errorf("events show --json has no top-level %q: %v", k, m)
		}
	}
	if _, nested := m["event"]; nested || m["state"] != "dead" || m["id"] != float64(ids["poison1"]) {
		t.Errorf("events show --json = %v", m)
	}
}

// TestWindowsAreSpans: every window and age is a span as operators write
// it (a Go duration or whole days), read once by operations for every
// front end; what is no positive span is refused.
func TestWindowsAreSpans(t *testing.T) {
	t.Parallel()
	f := newOpsFixture(t)
	ids := f.populate()
	old := factory.Event(f.ctx, t, f.store, &factory.EventOpts{Source: "stripe", EventID: "evt_days_old", Type: "old",
		CreatedAt: time.Now().Add(-36 * time.Hour)}).ID

	var day, twoDays eventsListJSON
	f.runJSON(&day, "events", "list", "--since", "1d")
	f.runJSON(&twoDays, "events", "list", "--since", "2d")
	if slices.Contains(listIDs(day), old) || !slices.Contains(listIDs(twoDays), old) || len(twoDays.Events) != len(day.Events)+1 {
		t.Errorf("--since 1d: %v; --since 2d: %v (the old event: %d)", listIDs(day), listIDs(twoDays), old)
	}
	var st operations.Stats
	f.runJSON(&st, "stats", "--window", "7d")
	if st.WindowSeconds != 7*24*3600 || st.Window.String() != "7d" {
		t.Errorf("stats --window 7d: %s, %v s", st.Window, st.WindowSeconds)
	}
	if human := f.runOK("stats", "--window", "1d"); !strings.Contains(human, "REJECTIONS (last 1d)") {
		t.Errorf("stats --window 1d:\n%s", human)
	}
	var dls deadLettersListOut
	f.runJSON(&dls, "dead-letters", "list", "--since", "1d")
	if len(dls.DeadLetters) != 3 || dls.DeadLetters[0].EventPK != ids["poison1"] {
		t.Errorf("dead-letters list --since 1d = %+v", dls.DeadLetters)
	}
	f.runOK("dead-letters", "requeue", "--source", "github", "--yes")
	var acts operations.ActionPage
	f.runJSON(&acts, "actions", "--since", "7d")
	if len(acts.Actions) != 1 {
		t.Errorf("actions --since 7d = %+v", acts.Actions)
	}
	for _, bad := range [][]string{
		{"events", "list", "--since", "0"}, {"events", "list", "--since", "-2h"}, {"events", "list", "--since", "soon"},
		{"stats", "--window", "0"}, {"stats", "--window", "1w"}, {"actions", "--since", "-1d"},
		{"dead-letters", "list", "--since", "1x"}, {"replay", "--since", "0s", "--dry-run"},
	} {
		if _, _, err := f.run(bad...); err == nil {
			t.Errorf("%v accepted", bad)
		}
	}
}

// events list --match and --header search by content: the table holds
// exactly the matching events and says how far the search went; a search
// with filters combines them; what cannot be searched is refused, saying
// why.
func TestEventsListSearch(t *testing.T) {
	t.Parallel()
	f := newOpsFixture(t)
	a := f.insertBody("stripe", "evt_a", "order.paid", []byte(`{"customer":"cus_123","total":1500,"lines":[{"sku":"x"}]}`))
	f.insertBody("stripe", "evt_b", "order.paid", []byte(`{"customer":"cus_456","total":1500}`))
	c := f.insertBody("shop", "evt_c", "order.paid", []byte(`{"customer":"cus_123","total":20}`))
	gh := factory.Event(f.ctx, t, f.store, &factory.EventOpts{Source: "gh", SourceKind: "github", EventID: "gh_hook", Type: "push",
		Body: []byte(`{}`), Metadata: map[string]string{"github_hook_id": "77"}}).ID

	var page eventsListJSON
	f.runJSON(&page, "events", "list", "--match", `{"customer":"cus_123"}`)
	if got := listIDs(page); !slices.Equal(got, []int64{c, a}) || page.Search == nil || !page.Search.Complete {
		t.Fatalf("--match customer: %v (search %+v), want %d and %d, the whole window searched", got, page.Search, c, a)
	}
	f.runJSON(&page, "events", "list", "--match", `{"lines":[{"sku":"x"}]}`, "--source", "stripe", "--type", "order.paid", "--since", "1h")
	if got := listIDs(page); !slices.Equal(got, []int64{a}) {
		t.Fatalf("--match lines with source and type: %v, want %d", got, a)
	}
	f.runJSON(&page, "events", "list", "--header", "x-github-hook-id=77")
	if got := listIDs(page); !slices.Equal(got, []int64{gh}) {
		t.Fatalf("--header: %v, want %d", got, gh)
	}
	out := f.runOK("events", "list", "--match", `{"total":1500}`, "--from", "2020-01-01")
	if !strings.Contains(out, "evt_a") || !strings.Contains(out, "evt_b") || strings.Contains(out, "evt_c") ||
		!strings.Contains(out, "searched 4 events, the whole window received 2020-01-01 00:00:00 to now") {
		t.Fatalf("--match total printed:\n%s", out)
	}
	out = f.runOK("events", "list", "--match", `{"total":1500}`, "--from", "2020-01-01", "--limit", "1")
	if !strings.Contains(out, "evt_b") || strings.Contains(out, "evt_a") || !strings.Contains(out, "the older ones are not searched yet") ||
		!strings.Contains(out, "(more: --before ") {
		t.Fatalf("a search stopped at its limit printed:\n%s", out)
	}
	out = f.runOK("events", "list", "--match", `{"customer":"cus_999"}`)
	if !strings.Contains(out, "no events match") || !strings.Contains(out, "searched 4 events, the whole window") {
		t.Fatalf("a search finding nothing printed:\n%s", out)
	}
	for args, want := range map[string]string{
		`{"customer":`:          "match: not JSON",
		`"cus_123"`:             "match: a JSON object or array",
		`header:X-Customer=123`: "the receiver stores only these headers, which can be searched: ",
	} {
		flag, val := "--match", args
		if h, ok := strings.CutPrefix(args, "header:"); ok {
			flag, val = "--header", h
		}
		_, stderr, err := f.run("events", "list", flag, val)
		if err == nil || !strings.Contains(err.Error()+stderr, want) {
			t.Errorf("events list %s %s: %v %s, want %q", flag, val, err, stderr, want)
		}
	}
}
