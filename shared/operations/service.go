package operations

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/webhook-inbox/webhook-inbox/shared/archive"
	"github.com/webhook-inbox/webhook-inbox/shared/blobstore"
	"github.com/webhook-inbox/webhook-inbox/shared/inbox"
	"github.com/webhook-inbox/webhook-inbox/shared/settings"
	"github.com/webhook-inbox/webhook-inbox/shared/storage"
	"github.com/webhook-inbox/webhook-inbox/shared/wake"
)

// EnvAccess is Config.Access: "read" (the default: a deployment that says
// nothing may not act) or "act".
const EnvAccess = "OPERATOR_ACCESS"

// The operator's pool: a request uses one connection at a time (a read
// transaction, or an action's statements); the second lets an archive run
// or an expunge read while its batch holds the first.
const (
	poolApplicationName = "webhook-inbox-operator"
	poolMaxConns        = 2
)

// Config configures a Service.
type Config struct {
	// Store is the database. Required.
	Store *storage.Store
	// Access is what the Service may do: AccessRead refuses every
	// action (cause read_only) but its dry run. Required.
	Access Access
	// Archive is the archiver's configuration (archive.ConfigFromEnv,
	// without Store and Blobs: the Service opens the bucket at its first
	// use): archived bodies are read, expunges and archive runs done with
	// it. Nil when the archive's settings are not given; those requests
	// then fail with cause archive_not_configured.
	Archive *archive.Config
	// ArchiveMinAge is the archiver's ARCHIVE_MIN_AGE, for what Stats
	// counts as due for archiving even where the archive itself is not
	// configured; 0 is Archive's, else archive.DefaultMinAge.
	ArchiveMinAge time.Duration
	// Logger gets one line per action (never a body). Default: discard.
	Logger *slog.Logger
	// Wake, when set, starts the processor after a requeue or replay made
	// events due (wake.Waker): the deployed processor runs only when woken.
	// A failure is logged; the action stands, and its events wait for the
	// sweep. Nil (webhookctl on the database, the dev stack, whose
	// processor polls) wakes nothing.
	Wake Waker
	// Waking is how Wake is opened (ConfigFromEnv sets it; wake.Open).
	// New ignores it.
	Waking wake.Config

	// Database is how ConfigFromEnv says to open Store; New ignores it.
	Database storage.PoolConfig
}

// ConfigFromEnv reads the operator function's configuration with getenv:
// its access (OPERATOR_ACCESS), its pool (the DATABASE_* settings every
// function reads) and, when ARCHIVE_BUCKET is set, the archiver's settings
// (ARCHIVE_*, S3_*). Every problem is reported at once.
func ConfigFromEnv(getenv func(string) string) (Config, error) {
	e := settings.NewEnv(getenv)
	c := Config{
		Access:        Access(e.OneOf(EnvAccess, string(AccessRead), string(AccessRead), string(AccessAct))),
		ArchiveMinAge: e.Age(archive.EnvMinAge, archive.DefaultMinAge),
	}
	db, dbErr := storage.PoolConfigFromEnv(getenv)
	db.ApplicationName, db.MaxConns = poolApplicationName, poolMaxConns
	c.Database = db
	waking, wakeErr := wake.ConfigFromEnv(getenv)
	c.Waking = waking
	errs := []error{e.Err(), dbErr, wakeErr}
	if getenv(blobstore.EnvBucket) != "" {
		// The archiver reads the same database settings: their problems
		// are said once (JoinUnique, below).
		a, err := archive.ConfigFromEnv(getenv)
		a.Database = storage.PoolConfig{}
		c.Archive = &a
		errs = append(errs, err)
	}
	return c, settings.JoinUnique(errs...)
}

// Waker starts the processor (wake.Waker).
type Waker interface {
	Wake(ctx context.Context) error
}

// wake starts the processor after an action made events due.
func (s *Service) wake(ctx context.Context) {
	if s.cfg.Wake == nil {
		return
	}
	if err := s.cfg.Wake.Wake(ctx); err != nil {
		s.log.Warn("operations: the processor's wake-up failed; the events wait for the sweep", "cause", inbox.CauseWakeFailed, "err", err)
	}
}

// Service implements API on the database (and the archive, for bodies,
// expunges and archive runs). It is safe for concurrent use.
type Service struct {
	cfg   Config
	log   *slog.Logger
	blobs func() (*blobstore.Store, error)
}

var _ API = (*Service)(nil)

// New checks cfg and returns a Service.
func New(cfg Config) (*Service, error) {
	if cfg.Store == nil {
		return nil, errors.New("operations: Store is required")
	}
	if cfg.Access != AccessRead && cfg.Access != AccessAct {
		return nil, fmt.Errorf("operations: Access must be %q or %q, got %q", AccessRead, AccessAct, cfg.Access)
	}
	s := &Service{cfg: cfg, log: cfg.Logger}
	if s.log == nil {
		s.log = slog.New(slog.NewJSONHandler(io.Discard, nil))
	}
	if cfg.Archive != nil {
		// The bucket's client is made at its first use: most requests
		// never touch the archive, and a cold start does not pay for it.
		s3 := cfg.Archive.S3
		s.blobs = sync.OnceValues(func() (*blobstore.Store, error) {
			return blobstore.Open(context.Background(), s3)
		})
	}
	return s, nil
}

// archiver returns an Archiver on the Service's database and bucket, with
// cfg (the Service's archive configuration, which a request may have
// adjusted).
func (s *Service) archiver(cfg archive.Config) (*archive.Archiver, error) {
	blobs, err := s.blobs()
	if err != nil {
		return nil, inbox.WrapError(inbox.CauseArchiveStoreFailed, err, "the archive's bucket cannot be opened")
	}
	cfg.Store, cfg.Blobs, cfg.Logger = s.cfg.Store, blobs, s.log
	return archive.New(cfg)
}

// archiveConfig is the Service's archive configuration, or the refusal of
// a request that needs it.
func (s *Service) archiveConfig(what string) (archive.Config, error) {
	if s.cfg.Archive == nil {
		return archive.Config{}, inbox.Errorf(inbox.CauseArchiveNotConfigured,
			"%s needs the archive's settings (%s, %s; %s, %s, %s for a local S3), and none are given here",
			what, blobstore.EnvBucket, archive.EnvPrefix, blobstore.EnvEndpoint, blobstore.EnvAccessKeyID, blobstore.EnvSecretAccessKey)
	}
	return *s.cfg.Archive, nil
}

// read runs f in one read-only transaction (one snapshot), with the
// database's clock at its start.
func (s *Service) read(ctx context.Context, f func(tx *storage.Tx, now time.Time) error) error {
	tx, err := s.cfg.Store.BeginReadOnly(ctx)
	if err != nil {
		return classify(err)
	}
	defer tx.Rollback(ctx)
	now, err := tx.PGNow(ctx)
	if err != nil {
		return classify(err)
	}
	if err := f(tx, now); err != nil {
		return classify(err)
	}
	// Nothing to commit; ending it here returns the connection at once.
	return classify(tx.Commit(ctx))
}

// actor is who performs an action of ctx, with its reason; refused when
// the Service is read-only or the request says nobody.
func (s *Service) actor(ctx context.Context, why string) (inbox.Actor, error) {
	if s.cfg.Access != AccessAct {
		return inbox.Actor{}, inbox.Errorf(inbox.CauseReadOnly, "this operator API is read-only: it counts (a dry run) but does not act; use the acting one (the stack's OperatorUrl, with its OperatorActPolicy)")
	}
	op, ok := OperatorFrom(ctx)
	if !ok {
		return inbox.Actor{}, inbox.Errorf(inbox.CauseUnauthenticated, "an action must say who performs it")
	}
	r, err := reason(why)
	if err != nil {
		return inbox.Actor{}, err
	}
	if len(op.Name) > maxActorBytes {
		return inbox.Actor{}, invalid("the operator's name is longer than %d bytes", maxActorBytes)
	}
	return inbox.Actor{Name: op.Name, Reason: r}, nil
}

// maxActorBytes is the record's bound on an actor's name.
const maxActorBytes = 200

// Whoami says who the caller is and what it may do here.
func (s *Service) Whoami(ctx context.Context) (*Identity, error) {
	id := &Identity{Access: s.cfg.Access}
	if op, ok := OperatorFrom(ctx); ok {
		id.Operator, id.Verified = op.Name, op.Verified
	}
	err := s.read(ctx, func(tx *storage.Tx, _ time.Time) error {
		var err error
		id.DatabaseRole, err = tx.PGCurrentUser(ctx)
		return err
	})
	return id, err
}

// classify gives an error without a cause the one it deserves: the
// storage's refusals of a selection, an unreachable or read-only database.
// An error with a cause keeps it.
func classify(err error) error {
	if err == nil {
		return nil
	}
	var ie *inbox.Error
	if errors.As(err, &ie) {
		return err
	}
	switch {
	case errors.Is(err, storage.ErrEventNotFound):
		return inbox.WrapError(inbox.CauseEventNotFound, err, "no such event")
	case errors.Is(err, storage.ErrEmptyFilter), errors.Is(err, storage.ErrEmptyReplayFilter):
		return inbox.WrapError(inbox.CauseInvalidArgument, err, "the selection is empty: name an id, a source, a type, a time window, or all")
	case errors.Is(err, storage.ErrNoActor):
		return inbox.WrapError(inbox.CauseUnauthenticated, err, "an action must say who performs it")
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return inbox.WrapError(inbox.CauseDatabaseUnavailable, err, "the database did not answer in time")
	}
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		switch {
		case pgErr.Code == "25006" || pgErr.Code == "42501":
			// A write in a read-only transaction, or a privilege the role
			// lacks: a read-only deployment asked to act.
			return inbox.WrapError(inbox.CauseReadOnly, err, "the database refused the change: this operator API's database role may not make it")
		case len(pgErr.Code) == 5 && (pgErr.Code[:2] == "08" || pgErr.Code[:2] == "53" || pgErr.Code[:2] == "57"):
			return inbox.WrapError(inbox.CauseDatabaseUnavailable, err, "the database is unavailable")
		}
		return inbox.WrapError(inbox.CauseInternal, err, "the database refused the request")
	}
	var connErr *pgconn.ConnectError
	var netErr net.Error
	if errors.As(err, &connErr) || errors.As(err, &netErr) || pgconn.Timeout(err) {
		return inbox.WrapError(inbox.CauseDatabaseUnavailable, err, "the database is unavailable")
	}
	return inbox.WrapError(inbox.CauseInternal, err, "the request failed")
}
