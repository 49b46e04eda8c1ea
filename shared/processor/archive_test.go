package processor_test

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/webhook-inbox/webhook-inbox/internal/testkit/s3test"
	"github.com/webhook-inbox/webhook-inbox/internal/testkit/testclock"
	"github.com/webhook-inbox/webhook-inbox/shared/archive"
	"github.com/webhook-inbox/webhook-inbox/shared/inbox"
	"github.com/webhook-inbox/webhook-inbox/shared/processor"
	"github.com/webhook-inbox/webhook-inbox/shared/storage"
)

// TestReplayFromTheArchive: an event whose body
// was archived to S3 (versitygw here) is replayed; the processor reads the
// body back from its object (a ranged read, verified against the hash
// recorded at receipt) and its handler gets exactly the body, and payload,
// it got before archiving. Without an archive to read from, the attempt
// fails and is retried, never handled with a missing body.
func TestReplayFromTheArchive(t *testing.T) {
	t.Parallel()
	f := setup(t)
	type seen struct {
		body, payload string
		attempt       int
	}
	var got []seen
	f.reg.HandleFunc(processor.Source("stripe"), processor.AnyType, func(ctx context.Context, tx pgx.Tx, ev *processor.Event) error {
		got = append(got, seen{string(ev.Body), string(ev.Payload), ev.Attempts})
		return nil
	})
	// Byte for byte: spacing, key order and escapes a JSONB copy would
	// normalise, and a non-ASCII character.
	body := []byte("{\"type\": \"invoice.paid\",  \"id\":\"evt_1\", \"note\":\"caf\\u00e9 ü\"}\n")
	id := f.insertOne("stripe", "evt_1", "invoice.paid", body)
	f.drain(f.processor(processor.Config{}))

	blobs := s3test.Open(t, s3test.Bucket(t, s3test.Server(t)))
	arch, err := archive.New(archive.Config{Prefix: "archive", MinAge: time.Minute},
		archive.Deps{Store: f.store, Blobs: blobs, Clock: testclock.At(f.clock.Now().Add(time.Hour))})
	if err != nil {
		t.Fatal(err)
	}
	if res, err := arch.RunOnce(f.ctx); err != nil || res.Events != 1 {
		t.Fatalf("archive = %+v, %v", res, err)
	}
	if r := f.row(id); r.ArchivedAt == nil || r.Body != nil || r.Payload != nil {
		t.Fatalf("archived row = %+v", r)
	}
	res, err := f.store.EventReplay(f.ctx, storage.ReplayFilter{ID: id}, storage.ReplayOptions{Now: f.clock.Now(), By: inbox.Actor{Name: "test"}})
	if err != nil || res.Replayed != 1 || res.Archived != 1 {
		t.Fatalf("replay = %+v, %v", res, err)
	}

	// No archive configured: a failure of the attempt, retried later.
	if st := f.drain(f.processor(processor.Config{})); st.Retried != 1 || st.Handled != 0 {
		t.Fatalf("drain without an archive = %+v", st)
	}
	if h := f.history(id); len(h) != 2 || h[1].Cause != inbox.CauseArchiveStoreUnavailable || h[1].Dead {
		t.Fatalf("history = %+v", h)
	}
	f.clock.Advance(time.Hour)
	if st := f.drain(f.processorOn(processor.Config{}, processor.Deps{Bodies: arch})); st.Handled != 1 {
		t.Fatalf("drain with the archive = %+v", st)
	}
	if len(got) != 2 {
		t.Fatalf("the handler ran %d times, want 2", len(got))
	}
	for i, g := range got {
		if g.body != string(body) {
			t.Errorf("run %d: the handler saw body %q, want %q", i+1, g.body, body)
		}
	}
	if got[1].payload != got[0].payload {
		t.Errorf("the replay's payload %q, want the first run's %q", got[1].payload, got[0].payload)
	}
	if got[1].attempt != 3 {
		t.Errorf("the replay ran as attempt %d, want 3", got[1].attempt)
	}
	// Still archived: the body stays in S3 alone.
	if r := f.row(id); r.ProcessedAt == nil || r.ArchivedAt == nil || r.Body != nil {
		t.Fatalf("row after the replay = %+v", r)
	}
}
