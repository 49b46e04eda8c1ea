package devstack

import (
	"context"
	"log/slog"
)

// archiveRunDone is the message of the archiver's summary line, one per
// run (shared/archive).
const archiveRunDone = "archive: run done"

// quietIdle is the archiver's log under make dev: next, but for the
// summary line of a run that archived and swept nothing. The dev stack
// runs the archiver every 30 s and a person reads the log; the Lambda logs
// every run, since that line carries the run's metrics, zeros included,
// which the alarms read. A run that failed logs another message, so it is
// always kept.
func quietIdle(next slog.Handler) slog.Handler { return idleFilter{next} }

type idleFilter struct{ next slog.Handler }

func (h idleFilter) Enabled(ctx context.Context, l slog.Level) bool { return h.next.Enabled(ctx, l) }

func (h idleFilter) Handle(ctx context.Context, r slog.Record) error {
	if r.Message == archiveRunDone && idle(r) {
		return nil
	}
	return h.next.Handle(ctx, r)
}

func (h idleFilter) WithAttrs(as []slog.Attr) slog.Handler { return idleFilter{h.next.WithAttrs(as)} }
func (h idleFilter) WithGroup(name string) slog.Handler    { return idleFilter{h.next.WithGroup(name)} }

// idle says whether a run's summary counts no event archived and no
// object swept. A record without the counts is not taken for idle.
func idle(r slog.Record) bool {
	seen := 0
	zero := true
	r.Attrs(func(a slog.Attr) bool {
		if a.Key == "events" || a.Key == "swept" {
			seen++
			zero = zero && a.Value.Kind() == slog.KindInt64 && a.Value.Int64() == 0
		}
		return true
	})
	return seen == 2 && zero
}
