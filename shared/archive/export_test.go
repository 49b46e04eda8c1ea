package archive

import (
	"context"
	"errors"

	"github.com/webhook-inbox/webhook-inbox/shared/storage"
)

// Hooks and internals for the tests of package archive_test.

// SetAfterConfirm makes f run after each upload is confirmed, before the
// events are marked archived.
func SetAfterConfirm(a *Archiver, f func(ctx context.Context, key string) error) { a.afterConfirm = f }

// SetAfterChoose makes f run after each batch is chosen, before its
// object is recorded in the manifest.
func SetAfterChoose(a *Archiver, f func(ctx context.Context, key string)) { a.afterChoose = f }

// SetAfterCommit makes f run after each batch commits.
func SetAfterCommit(a *Archiver, f func(ctx context.Context, key string)) { a.afterCommit = f }

// CrashAfterUpload makes a's batches fail right after their upload is
// confirmed, and its runs skip the orphan sweep: what a process killed at
// that point leaves behind (an uploaded object, a pending manifest row, every
// payload still in Postgres), without killing the test process.
func CrashAfterUpload(a *Archiver) {
	a.noSweep = true
	a.afterConfirm = func(context.Context, string) error { return errCrash }
}

var errCrash = errors.New("simulated crash after upload")

// SetBloatMinBytes makes a's bloat gauges count relations from n bytes
// (storage.DefaultBloatThreshold's 16 MiB otherwise), so that a test's
// tables of a few megabytes count.
func SetBloatMinBytes(a *Archiver, n int64) {
	a.bloatThreshold = storage.BloatThreshold{Ratio: storage.DefaultBloatThreshold.Ratio, MinBytes: n}
}

// SweepOrphans runs a's orphan sweep alone, as RunOnce runs it after its
// batches, and returns the keys it deleted.
func SweepOrphans(ctx context.Context, a *Archiver) ([]string, error) { return a.sweepOrphans(ctx, "") }

// DecodeMember decodes one gzip member holding one line.
var DecodeMember = decodeMember

// ErrEmptyMember is what DecodeMember returns for expunge padding.
var ErrEmptyMember = errEmptyMember
