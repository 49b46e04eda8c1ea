package storage_test

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/webhook-inbox/webhook-inbox/internal/testkit/factory"
	"github.com/webhook-inbox/webhook-inbox/internal/testkit/field"
	"github.com/webhook-inbox/webhook-inbox/internal/testkit/pgtest"
	"github.com/webhook-inbox/webhook-inbox/internal/testkit/tier"
	"github.com/webhook-inbox/webhook-inbox/shared/storage"
	"github.com/webhook-inbox/webhook-inbox/shared/storage/migrate"
)

// The bloat estimate against real bloat: rows updated and deleted on a
// table whose autovacuum is off, so that nothing but the test vacuums or
// analyzes it. Each test has its own database.

// bloatOf returns the estimate of each relation of the tables matching
// pattern, by name.
func bloatOf(ctx context.Context, t *testing.T, s storage.Executor, pattern string) map[string]storage.RelationBloat {
	t.Helper()
	rs, err := s.PGBloatEstimate(ctx, pattern)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]storage.RelationBloat{}
	for _, r := range rs {
		if r.Kind == storage.BloatTOAST {
			r.Name = r.Table + " (TOAST)" // pg_toast_<oid>: named by its table here
		}
		out[r.Name] = r
	}
	return out
}

func execAll(ctx context.Context, t *testing.T, pool *pgxpool.Pool, stmts ...string) {
	t.Helper()
	for _, s := range stmts {
		if _, err := pool.Exec(ctx, s); err != nil {
			t.Fatalf("%s: %v", s, err)
		}
	}
}

func logBloat(t *testing.T, when string, b map[string]storage.RelationBloat, names ...string) {
	t.Helper()
	for _, n := range names {
		r := b[n]
		t.Logf("%-28s %-34s %9d bytes %5d pages, %5d expected: %5.1f%% %s", when, n, r.Size, r.Pages, r.ExpectedPages, 100*r.Ratio(), r.Unknown)
	}
}

// TestBloatEstimateRisesAndFalls: a table of its own (the estimate reads
// any table by name) bloated as webhook_events is by the processor's and
// the archiver's updates, and by deletes: the estimate of the table, its
// TOAST and each index rises past the threshold, and falls back after the
// remedy (REINDEX INDEX CONCURRENTLY for an index, VACUUM FULL for the
// table). Its sizes pass the default threshold's 16 MiB for the table.
func TestBloatEstimateRisesAndFalls(t *testing.T) {
	tier.Heavy(t, "bloats tables by the thousand rows")
	t.Parallel()
	ctx := t.Context()
	pool := pgtest.Pool(t)
	store := storage.New(pool)
	const probe = "bloat_probe"
	execAll(ctx, t, pool,
		`CREATE TABLE bloat_probe (id bigint PRIMARY KEY, grp int NOT NULL, note text, blob text, done boolean NOT NULL DEFAULT false)
		   WITH (autovacuum_enabled = off, toast.autovacuum_enabled = off)`,
		// Partial, as webhook_events_due_idx is.
		`CREATE INDEX bloat_probe_open_idx ON bloat_probe (grp, id) WHERE NOT done`,
		`CREATE INDEX bloat_probe_hash_idx ON bloat_probe USING hash (grp)`,
		// NULLs in note; every 100th row a 6 KB value that does not
		// compress, so it is stored out of line in 4 TOAST chunks.
		`INSERT INTO bloat_probe (id, grp, note, blob)
		 SELECT g, g % 100, CASE WHEN g % 10 <> 0 THEN repeat('n', 40) END,
		        CASE WHEN g % 100 = 0 THEN (SELECT string_agg(md5(g::text || ':' || i), '') FROM generate_series(1, 200) i) END
		   FROM generate_series(1, 150000) g`,
	)
	b := bloatOf(ctx, t, store, probe)
	for _, n := range []string{probe, "bloat_probe_pkey", "bloat_probe_open_idx"} {
		r := b[n]
		field.Check(t, n+" before ANALYZE, want unknown (not_analyzed)",
			field.Eq("Known()", r.Known(), false),
			field.Eq("Unknown", r.Unknown, storage.BloatNotAnalyzed),
			field.Eq("Ratio()", r.Ratio(), 0),
			field.Eq("Bytes()", r.Bytes(), 0),
			field.Eq("Over()", r.Over(storage.BloatThreshold{}), false),
		)
	}
	if r := b["bloat_probe_hash_idx"]; r.Unknown != storage.BloatNotBtree {
		t.Errorf("hash index: %+v", r)
	}

	execAll(ctx, t, pool, `VACUUM ANALYZE bloat_probe`)
	all := []string{probe, probe + " (TOAST)", "bloat_probe_pkey", "bloat_probe_open_idx"}
	fresh := bloatOf(ctx, t, store, probe)
	logBloat(t, "fresh", fresh, all...)
	// The partial index, filled in the order of id but keyed by grp
	// first, splits its pages as random keys do: about 70% full, which
	// reads about 30%, under the threshold.
	for _, n := range all {
		if r := fresh[n]; !r.Known() || r.Over(storage.BloatThreshold{Ratio: storage.DefaultBloatThreshold.Ratio}) {
			t.Errorf("%s fresh: %+v (%.2f), want known and under the threshold", n, r, r.Ratio())
		}
	}

	// Two updates of every row that change an indexed column (no HOT
	// update: each index gets a new entry too) leave two dead versions
	// of each row; deleting three in four rows with a large value leaves
	// their TOAST chunks dead between live ones. VACUUM frees the space
	// for reuse but keeps the pages.
	execAll(ctx, t, pool,
		`UPDATE bloat_probe SET grp = grp + 1`,
		`UPDATE bloat_probe SET grp = grp + 1`,
		`DELETE FROM bloat_probe WHERE blob IS NOT NULL AND id % 400 <> 0`,
		`VACUUM ANALYZE bloat_probe`,
	)
	bloated := bloatOf(ctx, t, store, probe)
	logBloat(t, "updated twice, vacuumed", bloated, all...)
	for _, n := range all {
		if r := bloated[n]; !r.Over(storage.BloatThreshold{Ratio: storage.DefaultBloatThreshold.Ratio}) || r.Bytes() < r.Size/2 {
			t.Errorf("%s bloated: %+v (%.2f), want over %.0f%%", n, r, r.Ratio(), 100*storage.DefaultBloatThreshold.Ratio)
		}
	}
	if r := bloated[probe]; !r.Over(storage.DefaultBloatThreshold) {
		t.Errorf("the table (%d bytes, %.2f) is not over the default threshold", r.Size, r.Ratio())
	}

	// REINDEX rebuilds the index alone; the table keeps its bloat.
	execAll(ctx, t, pool, `REINDEX INDEX CONCURRENTLY bloat_probe_pkey`)
	reindexed := bloatOf(ctx, t, store, probe)
	logBloat(t, "pkey reindexed", reindexed, "bloat_probe_pkey")
	if r := reindexed["bloat_probe_pkey"]; !r.Known() || r.Ratio() > 0.1 {
		t.Errorf("pkey after REINDEX: %+v (%.2f)", r, r.Ratio())
	}
	if r := reindexed[probe]; r.Ratio() < 0.5 {
		t.Errorf("the table after REINDEX of an index: %+v (%.2f), want still bloated", r, r.Ratio())
	}

	// VACUUM FULL rewrites the table, its TOAST and its indexes; the new
	// TOAST table has no statistics until a VACUUM (ANALYZE does not
	// count TOAST tables), which autovacuum gets to in time.
	execAll(ctx, t, pool, `VACUUM FULL bloat_probe`)
	if r := bloatOf(ctx, t, store, probe)[probe+" (TOAST)"]; r.Unknown != storage.BloatNotAnalyzed {
		t.Errorf("TOAST rewritten, not vacuumed: %+v", r)
	}
	execAll(ctx, t, pool, `VACUUM ANALYZE bloat_probe`)
	full := bloatOf(ctx, t, store, probe)
	logBloat(t, "VACUUM FULL", full, all...)
	for _, n := range all {
		if r := full[n]; !r.Known() || r.Ratio() > 0.2 {
			t.Errorf("%s after VACUUM FULL: %+v (%.2f), want under 20%%", n, r, r.Ratio())
		}
	}

	// A column added since the last ANALYZE has no statistics: unknown
	// until the next.
	execAll(ctx, t, pool, `ALTER TABLE bloat_probe ADD COLUMN extra int`)
	if r := bloatOf(ctx, t, store, probe)[probe]; r.Unknown != storage.BloatNotAnalyzed {
		t.Errorf("after ADD COLUMN: %+v", r)
	}
	execAll(ctx, t, pool, `ANALYZE bloat_probe`)
	if r := bloatOf(ctx, t, store, probe)[probe]; !r.Known() {
		t.Errorf("after ANALYZE: %+v", r)
	}

	// A failed CREATE INDEX CONCURRENTLY (grp repeats) leaves an invalid
	// index behind: reported as such, not estimated.
	if _, err := pool.Exec(ctx, `CREATE UNIQUE INDEX CONCURRENTLY bloat_probe_grp_key ON bloat_probe (grp)`); err == nil {
		t.Fatal("a unique index over repeated values was built")
	}
	if r := bloatOf(ctx, t, store, probe)["bloat_probe_grp_key"]; r.Unknown != storage.BloatInvalidIndex {
		t.Errorf("invalid index: %+v", r)
	}

	// A role that may not read the table may not read its statistics
	// either: unknown, never a guess. Its TOAST's estimate needs none.
	other := bloatOf(ctx, t, storage.New(pgtest.As(t, pool, migrate.RoleArchiver)), probe)
	for _, n := range []string{probe, "bloat_probe_pkey", "bloat_probe_open_idx"} {
		if r := other[n]; r.Unknown != storage.BloatNoPrivilege {
			t.Errorf("%s as %s: %+v, want no_privilege", n, migrate.RoleArchiver, r)
		}
	}
}

// TestBloatEstimateWebhookEvents: the inbox's own table through its life,
// rows put in their states by the factory (the processor's and the
// archiver's statements): every index is estimated, the partial ones
// included; processing and archiving leave the table and the partial
// indexes bloated; a table this small is reported, never flagged under the
// default threshold.
func TestBloatEstimateWebhookEvents(t *testing.T) {
	tier.Heavy(t, "bloats tables by the thousand rows")
	t.Parallel()
	ctx := t.Context()
	pool := pgtest.Pool(t)
	store := storage.New(pool)
	execAll(ctx, t, pool, `ALTER TABLE webhook_events SET (autovacuum_enabled = off, toast.autovacuum_enabled = off)`)

	// Empty tables have nothing to estimate: known, and no bloat.
	for n, r := range bloatOf(ctx, t, store, storage.InboxTables) {
		if r.Unknown == storage.BloatNotBtree {
			continue // the BRIN indexes of 00010: only btrees are estimated
		}
		if !r.Known() || r.Ratio() != 0 {
			t.Errorf("%s, empty: %+v", n, r)
		}
	}

	body := make([]byte, 0, 1200)
	body = append(body, `{"type":"invoice.paid","data":"`...)
	for len(body) < 1000 {
		body = append(body, "0123456789abcdef"...)
	}
	body = append(body, `"}`...)
	events := factory.Events(ctx, t, store, 3000, &factory.EventOpts{Body: body})
	names := []string{"webhook_events", "webhook_events_pkey", "webhook_events_provider_event_id_key", "webhook_events_due_idx", "webhook_events_archivable_idx"}
	b := bloatOf(ctx, t, store, storage.InboxTables)
	if r := b["webhook_events"]; r.Unknown != storage.BloatNotAnalyzed {
		t.Errorf("webhook_events never analyzed: %+v, want unknown", r)
	}
	for _, n := range names {
		if _, ok := b[n]; !ok {
			t.Errorf("no estimate of %s", n)
		}
	}

	execAll(ctx, t, pool, `VACUUM ANALYZE webhook_events`)
	fresh := bloatOf(ctx, t, store, storage.InboxTables)
	logBloat(t, "received", fresh, names...)
	for _, n := range names {
		if r := fresh[n]; !r.Known() || r.Ratio() >= storage.DefaultBloatThreshold.Ratio {
			t.Errorf("%s received: %+v (%.2f)", n, r, r.Ratio())
		}
	}

	ids := make([]int64, len(events))
	for i, ev := range events {
		ids[i] = ev.ID
	}
	factory.ProcessDue(ctx, t, store, time.Now())
	for i := 0; i < len(ids); i += 500 {
		factory.MarkArchived(ctx, t, store, "archive/bloat.jsonl.gz", ids[i:min(i+500, len(ids))]...)
	}
	execAll(ctx, t, pool, `VACUUM ANALYZE webhook_events`)
	archived := bloatOf(ctx, t, store, storage.InboxTables)
	logBloat(t, "processed, archived", archived, names...)
	for _, n := range []string{"webhook_events", "webhook_events_due_idx", "webhook_events_archivable_idx"} {
		r := archived[n]
		if r.Ratio() < storage.DefaultBloatThreshold.Ratio || !r.Over(storage.BloatThreshold{Ratio: storage.DefaultBloatThreshold.Ratio}) {
			t.Errorf("%s processed and archived: %+v (%.2f), want over %.0f%%", n, r, r.Ratio(), 100*storage.DefaultBloatThreshold.Ratio)
		}
		if r.Over(storage.DefaultBloatThreshold) {
			t.Errorf("%s (%d bytes) flagged under the default threshold's %d bytes", n, r.Size, storage.DefaultBloatThreshold.MinBytes)
		}
	}

	execAll(ctx, t, pool, `REINDEX INDEX CONCURRENTLY webhook_events_archivable_idx`, `VACUUM FULL webhook_events`, `ANALYZE webhook_events`)
	full := bloatOf(ctx, t, store, storage.InboxTables)
	logBloat(t, "VACUUM FULL", full, names...)
	for _, n := range names {
		if r := full[n]; !r.Known() || r.Ratio() >= 0.25 {
			t.Errorf("%s after VACUUM FULL: %+v (%.2f)", n, r, r.Ratio())
		}
	}
	if ev, err := store.EventGetByID(ctx, ids[0]); err != nil || ev.ArchivedAt == nil || ev.Body != nil {
		t.Fatalf("event after VACUUM FULL: %+v, %v", ev, err)
	}
}
