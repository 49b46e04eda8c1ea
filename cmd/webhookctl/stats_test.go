package main

import (
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/webhook-inbox/webhook-inbox/internal/testkit/factory"
	"github.com/webhook-inbox/webhook-inbox/internal/testkit/field"
	"github.com/webhook-inbox/webhook-inbox/internal/testkit/tier"
	"github.com/webhook-inbox/webhook-inbox/shared/inbox"
	"github.com/webhook-inbox/webhook-inbox/shared/operations"
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
	p, err := processor.New(processor.Config{}, processor.Deps{
		Pool: f.pool, Registry: registry(), Rand: func() float64 { return 0.5 },
		Logger: slog.New(slog.NewJSONHandler(io.Discard, nil)),
	})
	if err != nil {
		f.t.Fatal(err)
	}
	st, err := p.Drain(f.ctx)
	if err != nil {
		f.t.Fatalf("drain: %v", err)
	}
	if !field.Check(f.t, "drain",
		field.Eq("Handled", st.Handled, 2),
		field.Eq("Unhandled", st.Unhandled, 1),
		field.Eq("DeadLettered", st.DeadLettered, 3),
		field.Eq("Retried", st.Retried, 1),
	) {
		f.t.FailNow()
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
	if _, err := f.store.PayloadMismatchInsert(f.ctx, inbox.PayloadMismatch{
		Source: "stripe", EventID: "evt_ok_1", StoredSHA256: make([]byte, 32), ReceivedSHA256: append([]byte{1}, make([]byte, 31)...), ReceivedSize: 12,
	}); err != nil {
		f.t.Fatal(err)
	}
	// The receivers' record of the sources: stripe delivered a minute ago
	// (6h allowed), github has not delivered in the two hours since it
	// was configured with an hour allowed.
	factory.SourceActivity(f.ctx, f.t, f.store, now.Add(-2*time.Hour), storage.SourceRecord{Source: "github", SilentAfter: time.Hour})
	factory.SourceActivity(f.ctx, f.t, f.store, now.Add(-time.Minute),
		storage.SourceRecord{Source: "github", SilentAfter: time.Hour},
		storage.SourceRecord{Source: "stripe", SilentAfter: 6 * time.Hour, ReceivedAt: now.Add(-time.Minute)})
	return ids
}

func TestStats(t *testing.T) {
	t.Parallel()
	f := newOpsFixture(t)
	f.populate()
	// The archive's minimum age is one of the archive's settings: the
	// API reads it with the others (the bucket named).
	f.withArchive()
	f.env["ARCHIVE_MIN_AGE"] = "1ms"

	var r operations.Stats
	f.runJSON(&r, "stats")
	b := r.Backlog
	field.Check(t, "backlog",
		field.Eq("Unprocessed", b.Unprocessed, 3),
		field.Eq("Due", b.Due, 1),
		field.Eq("InFlight", b.InFlight, 1),
		field.Eq("Retrying", b.Retrying, 1),
		field.Is("OldestDueAt", b.OldestDueAt, b.OldestDueAt != nil, "set"),
		field.Is("OldestReceivedAt", b.OldestReceivedAt, b.OldestReceivedAt != nil, "set"),
	)
	if len(r.DeadLetters) != 2 {
		t.Errorf("dead letters = %+v (%d open), want 2 rows", r.DeadLetters, r.DeadLettersOpen)
	} else {
		field.Check(t, "dead letters",
			field.Eq("DeadLettersOpen", r.DeadLettersOpen, 3),
			field.Eq("[0]", r.DeadLetters[0], operations.DeadLetterCount{Source: "stripe", Type: "poison", Count: 2, OldestDeadAt: r.DeadLetters[0].OldestDeadAt}),
			field.Eq("[1].Source", r.DeadLetters[1].Source, "github"),
			field.Eq("[1].Count", r.DeadLetters[1].Count, 1),
		)
	}
	if len(r.Rejections) != 2 || r.Rejections[0] != (operations.RejectionCount{Source: "stripe", Cause: "signature_mismatch", Count: 5}) ||
		r.Rejections[1] != (operations.RejectionCount{Source: "nope", Cause: "unknown_source", Count: 1}) {
		t.Errorf("rejections = %+v", r.Rejections)
	}
	if len(r.PayloadMismatches) != 1 || r.PayloadMismatches[0].Source != "stripe" || r.PayloadMismatches[0].Count != 1 {
		t.Errorf("mismatches = %+v", r.PayloadMismatches)
	}
	a := r.Archive
	field.Check(t, "archive",
		field.Eq("Waiting", a.Waiting, 3),
		field.Eq("Due", a.Due, 3),
		field.Eq("Objects", a.Objects, 0),
		field.Eq("MinAgeSeconds", a.MinAgeSeconds, 0.001),
		field.Is("OldestProcessedAt", a.OldestProcessedAt, a.OldestProcessedAt != nil, "set"),
	)
	if len(r.Sources) != 2 {
		t.Errorf("sources = %+v, want github and stripe", r.Sources)
	} else {
		gh, st := r.Sources[0], r.Sources[1]
		field.Check(t, "sources",
			field.Eq("SourcesSilent", r.SourcesSilent, 1),
			field.Eq("github", gh.Source, "github"),
			field.Eq("github.Silent", gh.Silent, true),
			field.Eq("github.LastReceivedAt", gh.LastReceivedAt, nil),
			field.Is("github.SilentSince", gh.SilentSince, gh.SilentSince != nil && gh.SilentSince.Equal(gh.FirstSeenAt.Add(time.Hour)), "an hour after it was first seen"),
			field.Eq("github.SilentAfterSeconds", gh.SilentAfterSeconds, 3600.0),
			field.Eq("stripe.Silent", st.Silent, false),
			field.Is("stripe.LastReceivedAt", st.LastReceivedAt, st.LastReceivedAt != nil, "set"),
			field.Eq("stripe.Configured", st.Configured, true),
		)
	}
	tables := map[string]operations.TableSize{}
	for _, s := range r.Tables {
		tables[s.Name] = s
	}
	if ev := tables["webhook_events"]; len(tables) != 12 || ev.TotalBytes < ev.TableBytes+ev.IndexBytes || ev.IndexBytes == 0 {
		t.Errorf("tables = %+v", r.Tables)
	}
	if r.WindowSeconds != 3600 || r.At.IsZero() {
		t.Errorf("report = %+v", r)
	}

	// The window counts back from now: a refusal two hours old is out of
	// the default hour, in a three-hour window.
	factory.Rejection(f.ctx, t, f.store, &factory.RejectionOpts{Source: "old", Cause: "unknown_source", ReceivedAt: time.Now().Add(-2 * time.Hour)})
	var hour, three operations.Stats
	f.runJSON(&hour, "stats")
	f.runJSON(&three, "stats", "--window", "3h")
	if len(hour.Rejections) != 2 || len(three.Rejections) != 3 || three.WindowSeconds != 3*3600 {
		t.Errorf("1h window: %+v; 3h window: %+v", hour.Rejections, three.Rejections)
	}

	human := f.runOK("stats")
	for _, want := range []string{
		"BACKLOG", "unprocessed", "due 1, in flight 1, retrying 1", "DEAD LETTERS (open: 3)", "stripe", "poison",
		"REJECTIONS (last 1h)", "signature_mismatch", "PAYLOAD MISMATCHES", "ARCHIVE", "TABLES", "webhook_events",
		"SOURCES (silent: 1;", "none since first seen 2h", "SILENT since 1h", "6h", "SILENT AFTER",
	} {
		if !strings.Contains(human, want) {
			t.Errorf("stats lacks %q:\n%s", want, human)
		}
	}
}

func TestStatsEmptyDatabase(t *testing.T) {
	t.Parallel()
	f := newOpsFixture(t)
	var r operations.Stats
	f.runJSON(&r, "stats")
	if !field.Check(t, "empty report",
		field.Eq("Backlog.Unprocessed", r.Backlog.Unprocessed, 0),
		field.Eq("Backlog.OldestDueAt", r.Backlog.OldestDueAt, nil),
		field.Is("DeadLetters", r.DeadLetters, r.DeadLetters != nil, "an empty list, not null"),
		field.Is("Rejections", r.Rejections, r.Rejections != nil, "an empty list, not null"),
		field.Is("PayloadMismatches", r.PayloadMismatches, r.PayloadMismatches != nil, "an empty list, not null"),
		field.Is("Sources", r.Sources, r.Sources != nil, "an empty list, not null"),
		field.Eq("Archive.MinAgeSeconds", r.Archive.MinAgeSeconds, (7*24*time.Hour).Seconds()),
	) {
		t.FailNow()
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
		var r operations.Stats
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

// TestStatsBloat: the bloat section, per table, TOAST and index, from a
// database holding real bloat: a table of the inbox's name space (any
// webhook_* table is estimated, as one a later migration adds would be)
// updated twice with autovacuum off, big enough for the default
// threshold; and webhook_events with rows but never analyzed.
func TestStatsBloat(t *testing.T) {
	tier.Heavy(t, "bloats tables by the thousand rows")
	t.Parallel()
	f := newOpsFixture(t)
	for _, sql := range []string{
		`ALTER TABLE webhook_events SET (autovacuum_enabled = off)`,
		`CREATE TABLE webhook_bloat_probe (id bigint PRIMARY KEY, grp int NOT NULL, note text NOT NULL)
		   WITH (autovacuum_enabled = off)`,
		`CREATE INDEX webhook_bloat_probe_open_idx ON webhook_bloat_probe (grp, id)`,
		`INSERT INTO webhook_bloat_probe SELECT g, g % 100, repeat('n', 40) FROM generate_series(1, 150000) g`,
		// Two updates of an indexed column: two dead versions of every
		// row, in the table and in each index.
		`UPDATE webhook_bloat_probe SET grp = grp + 1`,
		`UPDATE webhook_bloat_probe SET grp = grp + 1`,
		`VACUUM ANALYZE webhook_bloat_probe`,
	} {
		if _, err := f.pool.Exec(f.ctx, sql); err != nil {
			t.Fatalf("%s: %v", sql, err)
		}
	}
	for i := range 100 {
		f.insert("stripe", fmt.Sprintf("evt_bloat_%03d", i), "ok")
	}
	// A unique index over repeated values fails to build and, built
	// CONCURRENTLY, stays behind invalid.
	if _, err := f.pool.Exec(f.ctx, `CREATE UNIQUE INDEX CONCURRENTLY webhook_bloat_probe_grp_key ON webhook_bloat_probe (grp)`); err == nil {
		t.Fatal("a unique index over repeated values was built")
	}

	var r operations.Stats
	f.runJSON(&r, "stats")
	if r.Bloat.ThresholdRatio != storage.DefaultBloatThreshold.Ratio || r.Bloat.ThresholdMinBytes != storage.DefaultBloatThreshold.MinBytes {
		t.Errorf("threshold = %+v", r.Bloat)
	}
	rel := map[string]operations.RelationBloat{}
	for _, b := range r.Bloat.Relations {
		rel[b.Name] = b
	}
	ev := rel["webhook_events"]
	field.Check(t, "webhook_events, never analyzed",
		field.Eq("Unknown", ev.Unknown, string(storage.BloatNotAnalyzed)),
		field.Eq("BloatRatio", ev.BloatRatio, nil),
		field.Eq("BloatBytes", ev.BloatBytes, nil),
		field.Eq("Over", ev.Over, false),
		field.Is("SizeBytes", ev.SizeBytes, ev.SizeBytes != 0, "some"),
	)
	for _, n := range []string{"webhook_events_pkey", "webhook_events_provider_event_id_key", "webhook_events_due_idx", "webhook_events_archivable_idx", "webhook_dead_letters"} {
		if _, ok := rel[n]; !ok {
			t.Errorf("no estimate of %s", n)
		}
	}
	tbl, idx, pkey := rel["webhook_bloat_probe"], rel["webhook_bloat_probe_open_idx"], rel["webhook_bloat_probe_pkey"]
	field.Check(t, "bloated table",
		field.Eq("Over", tbl.Over, true),
		field.Is("BloatRatio", tbl.BloatRatio, *tbl.BloatRatio >= 0.5, "at least 0.5"),
		field.Is("BloatBytes", tbl.BloatBytes, *tbl.BloatBytes >= tbl.SizeBytes/2, "at least half the size"),
		field.Eq("Kind", tbl.Kind, "table"),
		field.Is("Remedy", tbl.Remedy, strings.Contains(tbl.Remedy, "VACUUM FULL webhook_bloat_probe;") && strings.Contains(tbl.Remedy, "pg_repack"),
			"VACUUM FULL webhook_bloat_probe; and pg_repack"),
	)
	if !idx.Over || idx.Kind != "index" || idx.Remedy != "REINDEX INDEX CONCURRENTLY webhook_bloat_probe_open_idx;" {
		t.Errorf("bloated index: %+v", idx)
	}
	if b := rel["webhook_bloat_probe_grp_key"]; b.Unknown != string(storage.BloatInvalidIndex) || b.Over ||
		!strings.HasPrefix(b.Remedy, "DROP INDEX CONCURRENTLY webhook_bloat_probe_grp_key;") {
		t.Errorf("invalid index: %+v", b)
	}
	// As bloated, but too small to flag.
	field.Check(t, "small bloated index",
		field.Eq("Over", pkey.Over, false),
		field.Eq("Remedy", pkey.Remedy, ""),
		field.Is("BloatRatio", pkey.BloatRatio, *pkey.BloatRatio >= 0.5, "at least 0.5"),
		field.Is("SizeBytes", pkey.SizeBytes, pkey.SizeBytes < storage.DefaultBloatThreshold.MinBytes, "under the threshold's minimum"),
	)
	t.Logf("table %d bytes, %.0f%%; open_idx %d bytes, %.0f%%; pkey %d bytes, %.0f%%",
		tbl.SizeBytes, 100**tbl.BloatRatio, idx.SizeBytes, 100**idx.BloatRatio, pkey.SizeBytes, 100**pkey.BloatRatio)

	human := f.runOK("stats")
	for _, want := range []string{
		"BLOAT (estimated as of the last VACUUM or ANALYZE; flagged from 50% of a relation of 16.0 MiB or more)",
		"not analyzed yet (VACUUM ANALYZE webhook_events)", "OVER", "(under 16.0 MiB: not flagged)",
		"TO DO", "webhook_bloat_probe_open_idx:  REINDEX INDEX CONCURRENTLY webhook_bloat_probe_open_idx;",
		"INVALID index", "DROP INDEX CONCURRENTLY webhook_bloat_probe_grp_key;",
	} {
		if !strings.Contains(human, want) {
			t.Errorf("stats lacks %q:\n%s", want, human)
		}
	}

	// The remedy works, and the report says so.
	if _, err := f.pool.Exec(f.ctx, `REINDEX INDEX CONCURRENTLY webhook_bloat_probe_open_idx`); err != nil {
		t.Fatal(err)
	}
	var after operations.Stats
	f.runJSON(&after, "stats")
	for _, b := range after.Bloat.Relations {
		if b.Name == "webhook_bloat_probe_open_idx" {
			field.Check(t, "index after REINDEX",
				field.Eq("Over", b.Over, false),
				field.Eq("Remedy", b.Remedy, ""),
				field.Is("BloatRatio", b.BloatRatio, *b.BloatRatio <= 0.1, "at most 0.1"),
			)
		}
	}
}

// TestStatsDatabaseUnreachable: a database that does not answer is a
// clear error naming where it was looked for, and no half report.
func TestStatsDatabaseUnreachable(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close() // a port where nothing listens
	f := &opsFixture{t: t, ctx: t.Context(), env: map[string]string{
		"DATABASE_URL": "postgres://webhookctl@" + addr + "/inbox?sslmode=disable&connect_timeout=5",
	}}
	for _, args := range [][]string{{"stats"}, {"stats", "--json"}} {
		out, _, err := f.run(args...)
		if err == nil || !strings.Contains(err.Error(), "failed to connect") || !strings.Contains(err.Error(), addr) {
			t.Errorf("%v: err = %v", args, err)
		}
		if out != "" {
			t.Errorf("%v printed a report:\n%s", args, out)
		}
	}
}
