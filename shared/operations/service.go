package operations

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"time"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/webhook-inbox/webhook-inbox/shared/archive"
	"github.com/webhook-inbox/webhook-inbox/shared/blobstore"
	"github.com/webhook-inbox/webhook-inbox/shared/inbox"
	"github.com/webhook-inbox/webhook-inbox/shared/settings"
	"github.com/webhook-inbox/webhook-inbox/shared/source"
	"github.com/webhook-inbox/webhook-inbox/shared/storage"
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

// Config configures a Service: settings only; what it works on is its
// Deps.
type Config struct {
	// Access is what the Service may do: AccessRead refuses every
	// action (cause read_only) but its dry run. Required.
	Access Access
	// Archive is the archiver's settings (archive.ConfigFromEnv):
	// archived bodies are read, expunges and archive runs done with it,
	// on Deps.Blobs. Nil when the archive's settings are not given; those
	// requests then fail with cause archive_not_configured.
	Archive *archive.Config
	// ArchiveMinAge is the archiver's ARCHIVE_MIN_AGE, for what Stats
	// counts as due for archiving even where the archive itself is not
	// configured; 0 is Archive's, else archive.DefaultMinAge.
	ArchiveMinAge time.Duration
}

// Deps is what a Service works on and reports to.
type Deps struct {
	// Store is the database. Required.
	Store *storage.Store
	// Blobs is the archive's bucket (blobstore.Open makes no request),
	// used only with Config.Archive; without it the requests that need
	// the bucket fail with cause archive_store_failed.
	Blobs *blobstore.Store
	// Logger gets one line per action (never a body). Nil discards.
	Logger *slog.Logger
	// Wake, when set, starts the processor after a requeue or replay made
	// events due (wake.Waker): the deployed processor runs only when woken.
	// A failure is logged; the action stands, and its events wait for the
	// sweep. Nil (webhookctl on the database, the dev stack, whose
	// processor polls) wakes nothing.
	Wake Waker
	// Sources reads the sources document as it is now (source.Load, or
	// secrets.SourcesReader then source.Parse), for a re-ingest, which
	// verifies quarantined deliveries with the current secrets. Nil: a
	// re-ingest fails with cause sources_not_configured.
	Sources func(context.Context) (*source.Set, error)
}

// ConfigFromEnv reads the operator function's settings with getenv: its
// access (OPERATOR_ACCESS) and, when ARCHIVE_BUCKET is set, the
// archiver's (ARCHIVE_*). Every problem is reported at once. The caller
// reads the database (storage.PoolConfigFromEnv, then Pool), the bucket
// (blobstore.ConfigFromEnv, when ArchiveConfigured) and the wake-ups
// (wake.ConfigFromEnv), and opens them as Deps.
func ConfigFromEnv(getenv func(string) string) (Config, error) {
	e := settings.NewEnv(getenv)
	c := Config{
		Access:        Access(e.OneOf(EnvAccess, string(AccessRead), string(AccessRead), string(AccessAct))),
		ArchiveMinAge: e.Age(archive.EnvMinAge, archive.DefaultMinAge),
	}
	errs := []error{e.Err()}
	if ArchiveConfigured(getenv) {
		a, err := archive.ConfigFromEnv(getenv)
		c.Archive = &a
		errs = append(errs, err)
	}
	// ARCHIVE_MIN_AGE is read twice: its problem is said once.
	return c, settings.JoinUnique(errs...)
}

// ArchiveConfigured says whether getenv names the archive's bucket: the
// operator then reads and acts on the archive, and its caller opens the
// bucket as Deps.Blobs.
func ArchiveConfigured(getenv func(string) string) bool {
	return getenv(blobstore.EnvBucket) != ""
}

// Pool is the operator's pool: db (storage.PoolConfigFromEnv's) with the
// operator's application name and size.
func (Config) Pool(db storage.PoolConfig) storage.PoolConfig {
	db.ApplicationName, db.MaxConns = poolApplicationName, poolMaxConns
	return db
}

// Waker starts the processor (wake.Waker).
type Waker interface {
	Wake(ctx context.Context) error
}

// wake starts the processor after an action made events due.
func (s *Service) wake(ctx context.Context) {
	if s.deps.Wake == nil {
		return
	}
	if err := s.deps.Wake.Wake(ctx); err != nil {
		s.log.Warn("operations: the processor's wake-up failed; the events wait for the sweep", "cause", inbox.CauseWakeFailed, "err", err)
	}
}

// Service implements API on the database (and the archive, for bodies,
// expunges and archive runs). It is safe for concurrent use.
type Service struct {
	cfg  Config
	deps Deps
	log  *slog.Logger
	// budget bounds a search by content (search.go).
	budget budget
}

var _ API = (*Service)(nil)

// New checks cfg and deps and returns a Service.
func New(cfg Config, deps Deps) (*Service, error) {
	if deps.Store == nil {
		return nil, errors.New("operations: no store")
	}
	if cfg.Access != AccessRead && cfg.Access != AccessAct {
		return nil, fmt.Errorf("operations: Access must be %q or %q, got %q", AccessRead, AccessAct, cfg.Access)
	}
	if deps.Logger == nil {
		deps.Logger = slog.New(slog.DiscardHandler)
	}
	return &Service{cfg: cfg, deps: deps, log: deps.Logger, budget: defaultBudget}, nil
}

// archiver returns an Archiver on the Service's database and bucket, with
// cfg (the Service's archive configuration, which a request may have
// adjusted) and clock (nil: the system's).
func (s *Service) archiver(cfg archive.Config, clock archive.Clock) (*archive.Archiver, error) {
	if s.deps.Blobs == nil {
		return nil, inbox.Errorf(inbox.CauseArchiveStoreFailed, "the archive's bucket is not open here")
	}
	return archive.New(cfg, archive.Deps{Store: s.deps.Store, Blobs: s.deps.Blobs, Logger: s.log, Clock: clock})
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
	tx, err := s.deps.Store.BeginReadOnly(ctx)
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

// confirmed is how an action done in one transaction (a pause, a resume,
// a re-ingest, a purge) was asked to run: only counted, or done; the
// count the operator confirmed; why.
type confirmed struct {
	dryRun bool
	expect *int
	reason string
	// what names the action, and of what its count is, in a refusal for a
	// changed count ("re-ingest", "deliveries").
	what, of string
}

// actInTx runs an action done in one transaction. A dry run only counts,
// in one snapshot. Otherwise, once the operator and the reason are known,
// one transaction counts (when the count is not the one confirmed,
// nothing changes: cause count_changed), acts and records the action
// (act), and commits: the count the operator confirmed is the one the
// action changed, and no change goes unrecorded. count and act read the
// database's clock at the transaction's start; actInTx returns who
// acted.
func (s *Service) actInTx(ctx context.Context, r confirmed, count func(tx *storage.Tx, now time.Time) (int, error),
	act func(tx *storage.Tx, now time.Time, by inbox.Actor) error) (inbox.Actor, error) {
	if r.dryRun {
		return inbox.Actor{}, s.read(ctx, func(tx *storage.Tx, now time.Time) error {
			_, err := count(tx, now)
			return err
		})
	}
	by, err := s.actor(ctx, r.reason)
	if err != nil {
		return by, err
	}
	tx, err := s.deps.Store.Begin(ctx)
	if err != nil {
		return by, classify(err)
	}
	defer tx.Rollback(ctx)
	now, err := tx.PGNow(ctx)
	if err != nil {
		return by, classify(err)
	}
	n, err := count(tx, now)
	if err != nil {
		return by, classify(err)
	}
	if r.expect != nil && n != *r.expect {
		return by, countChanged(n, *r.expect, r.what, r.of)
	}
	if err := act(tx, now, by); err != nil {
		return by, classify(err)
	}
	return by, classify(tx.Commit(ctx))
}

// countChanged refuses an action whose selection no longer counts what
// the operator confirmed.
func countChanged(now, want int, what, of string) error {
	return inbox.Errorf(inbox.CauseCountChanged, "the %s now selects %d %s, not the %d confirmed: nothing was changed; count again", what, now, of, want)
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
	case errors.Is(err, storage.ErrEmptyFilter), errors.Is(err, storage.ErrEmptyReplayFilter), errors.Is(err, storage.ErrEmptyDiscardFilter):
		return inbox.WrapError(inbox.CauseInvalidArgument, err, emptySelection)
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

// stoppedClock is an archive.Clock that always reads one time: the
// database's, read with a request's count, so that its run archives
// exactly what the count saw as due.
type stoppedClock time.Time

func (c stoppedClock) Now() time.Time { return time.Time(c) }
