package archive

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/webhook-inbox/webhook-inbox/shared/blobstore"
	"github.com/webhook-inbox/webhook-inbox/shared/inbox"
	"github.com/webhook-inbox/webhook-inbox/shared/storage"
)

// OpenBodies returns what the processor reads archived bodies with, for
// replays of archived events: an Archiver on the processor's own pool and
// the archive's bucket, used for Body alone.
func OpenBodies(ctx context.Context, s3 blobstore.Config, pool *pgxpool.Pool) (*Archiver, error) {
	blobs, err := blobstore.Open(ctx, s3)
	if err != nil {
		return nil, fmt.Errorf("open the archive for replays: %w", err)
	}
	return New(Config{}, Deps{Store: storage.New(pool), Blobs: blobs})
}

// Body returns the raw body of an event already read (storage's
// EventGetBy*), byte for byte as received, wherever it is: from the row
// while it is in Postgres, else from its archive object with one ranged GET
// of its gzip member. Either way the bytes are checked against the SHA-256
// recorded at receipt, so what comes back is what the sender signed.
//
// Errors carry a cause: event_expunged (ErrExpunged), body_expired
// (past retention), archive_corrupt (ErrCorrupt), archive_store_unavailable,
// archive_store_failed.
func (a *Archiver) Body(ctx context.Context, ev *inbox.Event) ([]byte, error) {
	body, err := a.readLocated(ctx, ev)
	if err != nil && ev.ArchiveKey != "" && (errors.Is(err, ErrCorrupt) || inbox.CauseOf(err) == inbox.CauseArchiveStoreFailed) {
		// An expunge may have rewritten the object, or the retention pass
		// deleted it, between the read of the row and of the object: then
		// the answer is "expunged" or "expired", not "corrupt" or "missing".
		if again, lerr := a.store.EventGetByID(ctx, ev.ID); lerr == nil {
			switch {
			case again.ExpungedAt != nil:
				return nil, expungedError(ev.Source, ev.EventID)
			case again.BodyExpiredAt != nil:
				return nil, expiredError(ev.Source, ev.EventID, *again.BodyExpiredAt)
			}
		}
	}
	return body, err
}

func (a *Archiver) readLocated(ctx context.Context, loc *inbox.Event) ([]byte, error) {
	switch {
	case loc.ExpungedAt != nil:
		return nil, expungedError(loc.Source, loc.EventID)
	case loc.BodyExpiredAt != nil:
		return nil, expiredError(loc.Source, loc.EventID, *loc.BodyExpiredAt)
	case loc.Body != nil:
		if err := verifyBody(loc, loc.Body); err != nil {
			return nil, inbox.WrapError(inbox.CauseArchiveCorrupt, err, "stored body failed verification")
		}
		return loc.Body, nil
	case loc.ArchiveKey == "":
		return nil, inbox.Errorf(inbox.CauseInternal, "event %s/%s has neither a body nor an archive location", loc.Source, loc.EventID)
	}
	key := loc.ArchiveKey
	member, err := a.blobs.GetRange(ctx, key, loc.ArchiveOffset, loc.ArchiveLength)
	if err != nil {
		return nil, storeError(err, "read archived body")
	}
	body, err := bodyFromMember(member, loc.ID, loc.Source, loc.EventID)
	if err == nil {
		err = verifyBody(loc, body)
	}
	if err != nil {
		return nil, inbox.WrapError(inbox.CauseArchiveCorrupt,
			fmt.Errorf("%s/%s in %s [%d,+%d): %w: %w", loc.Source, loc.EventID, key, loc.ArchiveOffset, loc.ArchiveLength, ErrCorrupt, err),
			"archived body failed verification")
	}
	return body, nil
}

// bodyFromMember decodes one member and checks that it is the event's line.
func bodyFromMember(member []byte, id int64, source, eventID string) ([]byte, error) {
	l, err := decodeMember(member)
	if err != nil {
		return nil, err
	}
	if l.ID != id || l.Source != source || l.EventID != eventID {
		return nil, fmt.Errorf("member holds event %d %s/%s", l.ID, l.Source, l.EventID)
	}
	return l.RawBody()
}

func verifyBody(loc *inbox.Event, body []byte) error {
	sum := sha256.Sum256(body)
	if len(body) != loc.BodySize || !bytes.Equal(sum[:], loc.BodySHA256) {
		return fmt.Errorf("body of %s/%s: %d bytes sha256 %x, recorded %d bytes sha256 %x",
			loc.Source, loc.EventID, len(body), sum, loc.BodySize, loc.BodySHA256)
	}
	return nil
}

func expungedError(source, eventID string) error {
	return inbox.WrapError(inbox.CauseEventExpunged, fmt.Errorf("%s/%s: %w", source, eventID, ErrExpunged), "event body was expunged")
}

func expiredError(source, eventID string, at time.Time) error {
	return inbox.WrapError(inbox.CauseBodyExpired,
		fmt.Errorf("%s/%s: %w on %s", source, eventID, errBodyExpired, at.UTC().Format(time.DateOnly)),
		"event body is past the body retention and was removed")
}
