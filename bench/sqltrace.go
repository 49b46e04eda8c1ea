package main

import (
	"cmp"
	"context"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
)

// StatementTime is the time a client waited for one kind of statement,
// per event.
type StatementTime struct {
	Statement  string  `json:"statement"`
	PerEvent   float64 `json:"per_event"`
	MeanMs     float64 `json:"mean_ms"`
	MsPerEvent float64 `json:"ms_per_event"`
}

// sqlTimer is a pgx tracer that sums the time of each kind of statement,
// from the client's side: encode, round trip, server work, decode.
type sqlTimer struct {
	mu    sync.Mutex
	stats map[string]*sqlStat
}

type sqlStat struct {
	n     int64
	total time.Duration
}

type traceStart struct {
	sql string
	at  time.Time
}

type traceKey struct{}

func newSQLTimer() *sqlTimer { return &sqlTimer{stats: map[string]*sqlStat{}} }

// TraceQueryStart implements pgx.QueryTracer.
func (t *sqlTimer) TraceQueryStart(ctx context.Context, _ *pgx.Conn, d pgx.TraceQueryStartData) context.Context {
	return context.WithValue(ctx, traceKey{}, traceStart{sql: d.SQL, at: time.Now()})
}

// TraceQueryEnd implements pgx.QueryTracer.
func (t *sqlTimer) TraceQueryEnd(ctx context.Context, _ *pgx.Conn, _ pgx.TraceQueryEndData) {
	st, ok := ctx.Value(traceKey{}).(traceStart)
	if !ok {
		return
	}
	d := time.Since(st.at)
	name := statementName(st.sql)
	t.mu.Lock()
	defer t.mu.Unlock()
	s := t.stats[name]
	if s == nil {
		s = &sqlStat{}
		t.stats[name] = s
	}
	s.n++
	s.total += d
}

// statementName names the processor's statements: by the sqlc query name
// that starts the generated ones (the known ones described), else by
// their text.
func statementName(sql string) string {
	s := strings.TrimSpace(sql)
	if rest, ok := strings.CutPrefix(s, "-- name: "); ok {
		name, _, _ := strings.Cut(rest, " ")
		if d, ok := knownStatements[name]; ok {
			return d
		}
		return name
	}
	switch {
	case strings.EqualFold(s, "begin"):
		return "BEGIN"
	case strings.EqualFold(s, "commit"):
		return "COMMIT"
	case strings.EqualFold(s, "rollback"):
		return "ROLLBACK"
	}
	if len(s) > 40 {
		s = s[:40] + "..."
	}
	return s
}

// knownStatements describes the processor's statements by sqlc name.
var knownStatements = map[string]string{
	"EventGetDue":     "look for due events (EventGetDue)",
	"EventClaimBatch": "claim and lock a batch (EventClaimBatch, in the claim's transaction)",
	"EventClaimSolo":  "claim an event that runs alone (EventClaimSolo)",
	"ClaimSet":        "record the claim (ClaimSet, async commit, other connection)",
	"EventFinish":     "record the outcomes and the history (EventFinish)",
	"ClaimRelease":    "empty the claim (ClaimRelease)",
}

// perEvent returns the statements' times per event of n, largest first.
func (t *sqlTimer) perEvent(n int) []StatementTime {
	t.mu.Lock()
	defer t.mu.Unlock()
	var out []StatementTime
	for name, s := range t.stats {
		ms := float64(s.total) / float64(time.Millisecond)
		out = append(out, StatementTime{
			Statement: name, PerEvent: float64(s.n) / float64(n),
			MeanMs: ms / float64(s.n), MsPerEvent: ms / float64(n),
		})
	}
	slices.SortFunc(out, func(a, b StatementTime) int { return cmp.Compare(b.MsPerEvent, a.MsPerEvent) })
	return out
}
