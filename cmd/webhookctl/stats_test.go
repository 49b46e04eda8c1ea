package main

import (
	"encoding/json"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/webhook-inbox/webhook-inbox/internal/testkit/factory"
	"github.com/webhook-inbox/webhook-inbox/shared/inbox"
	"github.com/webhook-inbox/webhook-inbox/shared/processor"
	"github.com/webhook-inbox/webhook-inbox/shared/storage"
)

// populate puts events in every state the stats tell apart, and returns
// their ids by name.
func (f *opsFixture) populate() map[string]int64 {
	f.t.Helper()
	ids := map[string]int64{
		"ok1":       f.insert("stripe", "evt_ok_1", "ok"),
		"ok2":       f.insert("stripe", "evt_ok_2", "ok"),
		"unhandled": f.insert("stripe", "evt_unhandled", "invoice.created"),
		"poison1":   f.insert("stripe", "evt_poison_1", "poison"),
		"poison2":   f.insert("stripe", "evt_poison_2", "poison"),
		"ghpoison":  f.insert("github", "gh_poison", "poison"),
		"flaky":     f.insert("github", "gh_flaky", "flaky"),
	}
	// Jitter fixed at half the ceiling: the flaky event is due again in
	// 15s, after the test.
	p, err := processor.New(processor.Config{
		Pool: f.pool, Registry: registry(), Rand: func() float64 { return 0.5 },
		Logger: slog.New(slog.NewJSONHandler(io.Discard, nil)),
	})
	if err != nil {
		f.t.Fatal(err)
	}
	if st, err := p.Drain(f.ctx); err != nil || st.Handled != 2 || st.Unhandled != 1 || st.DeadLettered != 3 || st.Retried != 1 {
		f.t.Fatalf("drain = %+v, %v", st, err)
	}
	// One event claimed by a processor (in flight), one due.
	ids["inflight"] = f.insert("github", "gh_claimed", "ok")
	now := time.Now()
	if err := f.store.ClaimSet(f.ctx, storage.Claim{Processor: "test-processor/1", Token: "test-processor/1#1",
		EventIDs: []int64{ids["inflight"]}, ClaimedAt: now, LockedUntil: now.Add(2 * time.Minute)}); err != nil {
		f.t.Fatal(err)
	}
	ids["pending"] = f.insert("stripe", "evt_pending", "ok")
	// A sender refused after a secret roll (5 refusals, 4 of them
	// sampled away), one unknown source, and a redelivery whose body
	// changed.
	factory.Rejection(f.ctx, f.t, f.store, &factory.RejectionOpts{Source: "stripe", Cause: "signature_mismatch", Message: "no secret matched", Suppressed: 4})
	factory.Rejection(f.ctx, f.t, f.store, &factory.RejectionOpts{Source: "nope", Cause: "unknown_source", Message: "no such source"})
	if err := f.store.PayloadMismatchInsert(f.ctx, inbox.PayloadMismatch{
		Source: "stripe", EventID: "evt_ok_1", StoredSHA256: make([]byte, 32), ReceivedSHA256: append([]byte{1}, make([]byte, 31)...), ReceivedSize: 12,
	}); err != nil {
		f.t.Fatal(err)
	}
	return ids
}

func TestStats(t *testing.T) {
	t.Parallel()
	f := newOpsFixture(t)
	f.populate()
	f.env["ARCHIVE_MIN_AGE"] = "1ms"

	var r statsReport
	f.runJSON(&r, "stats")
	b := r.Backlog
	if b.Unprocessed != 3 || b.Due != 1 || b.InFlight != 1 || b.Retrying != 1 || b.OldestDueAt == nil || b.OldestReceivedAt == nil {
		t.Errorf("backlog = %+v", b)
	}
	if r.DeadLettersOpen != 3 || len(r.DeadLetters) != 2 ||
		r.DeadLetters[0] != (deadLetterCountJSON{"stripe", "poison", 2, r.DeadLetters[0].OldestDeadAt}) ||
		r.DeadLetters[1].Source != "github" || r.DeadLetters[1].Count != 1 {
		t.Errorf("dead letters = %+v", r.DeadLetters)
	}
	if len(r.Rejections) != 2 || r.Rejections[0] != (rejectionCountJSON{"stripe", "signature_mismatch", 5}) ||
		r.Rejections[1] != (rejectionCountJSON{"nope", "unknown_source", 1}) {
		t.Errorf("rejections = %+v", r.Rejections)
	}
	if len(r.PayloadMismatches) != 1 || r.PayloadMismatches[0].Source != "stripe" || r.PayloadMismatches[0].Count != 1 {
		t.Errorf("mismatches = %+v", r.PayloadMismatches)
	}
	if a := r.Archive; a.Waiting != 3 || a.Due != 3 || a.Objects != 0 || a.MinAgeSeconds != 0.001 || a.OldestProcessedAt == nil {
		t.Errorf("archive = %+v", a)
	}
	tables := map[string]tableSizeJSON{}
	for _, s := range r.Tables {
		tables[s.Name] = s
	}
	if ev := tables["webhook_events"]; len(tables) != 5 || ev.TotalBytes < ev.TableBytes+ev.IndexBytes || ev.IndexBytes == 0 {
		t.Errorf("tables = %+v", r.Tables)
	}
	if r.WindowSeconds != 3600 || r.At.IsZero() {
		t.Errorf("report = %+v", r)
	}

	// The window counts back from now: a refusal two hours old is out of
	// the default hour, in a three-hour window.
	factory.Rejection(f.ctx, t, f.store, &factory.RejectionOpts{Source: "old", Cause: "unknown_source", ReceivedAt: time.Now().Add(-2 * time.Hour)})
	var hour, three statsReport
	f.runJSON(&hour, "stats")
	f.runJSON(&three, "stats", "--window", "3h")
	if len(hour.Rejections) != 2 || len(three.Rejections) != 3 || three.WindowSeconds != 3*3600 {
		t.Errorf("1h window: %+v; 3h window: %+v", hour.Rejections, three.Rejections)
	}

	human := f.runOK("stats")
	for _, want := range []string{
		"BACKLOG", "unprocessed", "due 1, in flight 1, retrying 1", "DEAD LETTERS (open: 3)", "stripe", "poison",
		"REJECTIONS (last 1h0m0s)", "signature_mismatch", "PAYLOAD MISMATCHES", "ARCHIVE", "TABLES", "webhook_events",
	} {
		if !strings.Contains(human, want) {
			t.Errorf("stats lacks %q:\n%s", want, human)
		}
	}
}

func TestStatsEmptyDatabase(t *testing.T) {
	t.Parallel()
	f := newOpsFixture(t)
	var r statsReport
	f.runJSON(&r, "stats")
	if r.Backlog.Unprocessed != 0 || r.Backlog.OldestDueAt != nil || r.DeadLetters == nil || r.Rejections == nil ||
		r.PayloadMismatches == nil || r.Archive.MinAgeSeconds != (7*24*time.Hour).Seconds() {
		t.Fatalf("empty report = %+v", r)
	}
	if out := f.runOK("stats"); !strings.Contains(out, "nothing is due") {
		t.Fatalf("stats:\n%s", out)
	}
}

// TestStatsWatch: --watch refreshes; the hidden --watch-count bounds it.
func TestStatsWatch(t *testing.T) {
	t.Parallel()
	f := newOpsFixture(t)
	f.insert("stripe", "evt_1", "ok")
	out := f.runOK("stats", "--watch", "--interval", "10ms", "--watch-count", "3", "--json")
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 3 {
		t.Fatalf("%d reports, want 3:\n%s", len(lines), out)
	}
	var last time.Time
	for _, l := range lines {
		var r statsReport
		if err := json.Unmarshal([]byte(l), &r); err != nil || r.Backlog.Unprocessed != 1 {
			t.Fatalf("report %s: %v", l, err)
		}
		if !r.At.After(last) {
			t.Fatalf("reports not refreshed: %v then %v", last, r.At)
		}
		last = r.At
	}
	human := f.runOK("stats", "-w", "--interval", "10ms", "--watch-count", "2")
	if n := strings.Count(human, "BACKLOG"); n != 2 {
		t.Fatalf("%d human reports, want 2:\n%s", n, human)
	}
	if _, _, err := f.run("stats", "--watch", "--interval", "0s"); err == nil {
		t.Fatal("--interval 0 accepted")
	}
}
