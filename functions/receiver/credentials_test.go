package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/webhook-inbox/webhook-inbox/internal/sender"
	"github.com/webhook-inbox/webhook-inbox/internal/testkit/field"
	"github.com/webhook-inbox/webhook-inbox/internal/testkit/pgtest"
	"github.com/webhook-inbox/webhook-inbox/internal/testkit/poll"
	"github.com/webhook-inbox/webhook-inbox/internal/testkit/secretstest"
	"github.com/webhook-inbox/webhook-inbox/internal/testkit/tier"
	"github.com/webhook-inbox/webhook-inbox/shared/receiver"
	"github.com/webhook-inbox/webhook-inbox/shared/secrets"
	"github.com/webhook-inbox/webhook-inbox/shared/source"
	"github.com/webhook-inbox/webhook-inbox/shared/storage"
)

// passwordDB is a migrated database on a server of the test's own that
// checks passwords, as RDS does, with a role of the test's own for the
// receiver to log in as, and the Secrets Manager stand-in.
type passwordDB struct {
	t     *testing.T
	admin string // the database's URL as postgres (trusted), for the test's own checks
	role  string
	host  string
	port  string
	name  string
	sm    *secretstest.Server
	store *storage.Store // on admin
}

func setupPasswordDB(t *testing.T, password string) *passwordDB {
	t.Helper()
	c := pgtest.Cluster(t, pgtest.Passwords())
	admin := pgtest.MigratedURL(t, c)
	u, err := url.Parse(admin)
	if err != nil {
		t.Fatal(err)
	}
	pool, err := pgxpool.New(context.Background(), admin)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	return &passwordDB{
		t: t, admin: admin, role: pgtest.LoginRole(t, admin, password),
		host: u.Hostname(), port: u.Port(), name: strings.TrimPrefix(u.Path, "/"),
		sm: secretstest.Shared(t), store: storage.New(pool),
	}
}

// credentials is the JSON of an RDS-managed secret: username and password
// only.
func credentials(user, password string) string {
	b, _ := json.Marshal(map[string]string{"username": user, "password": password})
	return string(b)
}

// env is the receiver's environment in AWS with the secret arn: the
// secret gives the credentials, the environment where the database is.
// The local server has no TLS, hence sslmode disable.
func (db *passwordDB) env(arn string) func(string) string {
	env := map[string]string{
		"DATABASE_SECRET_ARN": arn, "DATABASE_HOST": db.host, "DATABASE_PORT": db.port, "DATABASE_NAME": db.name,
		"DATABASE_SSLMODE": "disable", "AWS_REGION": secretstest.Region,
		"WEBHOOK_SOURCES": sources, "LOG_LEVEL": "error",
	}
	return func(k string) string { return env[k] }
}

// answer is what the receiver answered one delivery.
type answer struct {
	id     string
	code   int
	status string
	cause  string
	retry  string // Retry-After
}

// deliver signs a Stripe event with id and hands it to h as API Gateway
// would; it returns errors rather than failing, to run in any goroutine.
func deliver(ctx context.Context, h func(context.Context, events.APIGatewayV2HTTPRequest) (events.APIGatewayV2HTTPResponse, error), template events.APIGatewayV2HTTPRequest, src *source.Source, id string) (answer, error) {
	body := fmt.Appendf(nil, `{"id":%q,"object":"event","type":"invoice.paid","data":{}}`, id)
	req, err := sender.Sign(src, body, "", time.Now())
	if err != nil {
		return answer{}, err
	}
	ev := template
	ev.Headers = map[string]string{}
	for k, v := range template.Headers {
		ev.Headers[k] = v
	}
	ev.Headers["stripe-signature"] = req.Header.Get("Stripe-Signature")
	ev.Headers["content-length"] = strconv.Itoa(len(body))
	ev.Body = string(body)
	resp, err := h(ctx, ev)
	if err != nil {
		return answer{}, err
	}
	var out struct{ Status, Cause string }
	if err := json.Unmarshal([]byte(resp.Body), &out); err != nil {
		return answer{}, fmt.Errorf("answer %d %q: %w", resp.StatusCode, resp.Body, err)
	}
	return answer{id: id, code: resp.StatusCode, status: out.Status, cause: out.Cause, retry: resp.Headers["Retry-After"]}, nil
}

// stripeTemplate is the recorded API Gateway event and the source that
// signs for it.
func stripeTemplate(t *testing.T) (events.APIGatewayV2HTTPRequest, *source.Source) {
	t.Helper()
	raw, err := os.ReadFile("testdata/apigw_v2_stripe.json")
	if err != nil {
		t.Fatal(err)
	}
	var ev events.APIGatewayV2HTTPRequest
	if err := json.Unmarshal(raw, &ev); err != nil {
		t.Fatal(err)
	}
	set, err := source.Parse([]byte(sources))
	if err != nil {
		t.Fatal(err)
	}
	src, _ := set.Lookup("stripe")
	return ev, src
}

// TestSetupWithRDSManagedSecret: a secret holding only username and
// password (what RDS manages, rds!...) works with DATABASE_HOST, _PORT and
// _NAME, read through the real SDK, on a server that checks the password:
// the event is stored by the secret's role. The same set-up with a wrong
// password in the secret starts (a database that refuses is not fatal at
// init) and answers 503.
func TestSetupWithRDSManagedSecret(t *testing.T) {
	tier.Heavy(t, "starts a password-checking cluster")
	t.Parallel()
	ctx := context.Background()
	db := setupPasswordDB(t, "managed-password")
	template, src := stripeTemplate(t)

	arn := db.sm.Create(t, "rds!cluster-5c1d3a1e", credentials(db.role, "managed-password"))
	h, closePool, err := setup(ctx, db.env(arn))
	if err != nil {
		t.Fatal(err)
	}
	defer closePool()
	a, err := deliver(ctx, h, template, src, "evt_rds_managed")
	if err != nil || a.code != 200 || a.status != "accepted" {
		t.Fatalf("delivery: %+v %v", a, err)
	}
	if _, err := db.store.EventGetByKey(ctx, "stripe", "evt_rds_managed"); err != nil {
		t.Fatalf("accepted but not stored: %v", err)
	}
	var sessions int
	if err := db.store.Pool().QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity WHERE usename = $1 AND datname = $2`, db.role, db.name).Scan(&sessions); err != nil || sessions == 0 {
		t.Fatalf("no session of %s on %s (%d, %v): the receiver did not log in as the secret's user", db.role, db.name, sessions, err)
	}

	wrong := db.sm.Create(t, "rds!cluster-0bad", credentials(db.role, "not-the-password"))
	h, closeWrong, err := setup(ctx, db.env(wrong))
	if err != nil {
		t.Fatalf("a refusing database must not stop the start: %v", err)
	}
	defer closeWrong()
	a, err = deliver(ctx, h, template, src, "evt_wrong_password")
	if err != nil {
		t.Fatalf("with a wrong password: %v", err)
	}
	if !field.Check(t, "with a wrong password",
		field.Eq("status", a.code, 503),
		field.Eq("cause", a.cause, "database_unavailable"),
		field.Is("Retry-After", a.retry, a.retry != "", "set"),
	) {
		t.FailNow()
	}
}

// TestSetupDatabaseFailures: the receiver's set-up refuses each mistake
// in its database settings with an error naming the variable or the
// secret, never a password.
func TestSetupDatabaseFailures(t *testing.T) {
	t.Parallel()
	sm := secretstest.Shared(t)
	const pw = "hunter2"
	noPassword := sm.Create(t, "db", `{"username":"webhook_receiver"}`)
	managed := sm.Create(t, "rds!db-1", credentials("webhook_receiver", pw))
	denied := sm.Create(t, "db", credentials("webhook_receiver", pw))
	sm.Deny(t, denied)
	missing := "arn:aws:secretsmanager:" + secretstest.Region + ":" + secretstest.Account + ":secret:gone-AbCdEf"
	base := map[string]string{"WEBHOOK_SOURCES": sources, "AWS_REGION": secretstest.Region, "DATABASE_HOST": "db.example.internal"}
	cases := map[string]struct {
		env  map[string]string
		want []string
	}{
		"a secret without a password":    {map[string]string{"DATABASE_SECRET_ARN": noPassword}, []string{noPassword, "has no password"}},
		"a bad port":                     {map[string]string{"DATABASE_SECRET_ARN": managed, "DATABASE_PORT": "five"}, []string{"DATABASE_PORT", `"five"`}},
		"IAM auth without DATABASE_USER": {map[string]string{"DATABASE_IAM_AUTH": "true"}, []string{"DATABASE_USER"}},
		"a secret that does not exist":   {map[string]string{"DATABASE_SECRET_ARN": missing}, []string{"DATABASE_SECRET_ARN", missing, "ResourceNotFoundException"}},
		"a secret the role may not read": {map[string]string{"DATABASE_SECRET_ARN": denied}, []string{"DATABASE_SECRET_ARN", denied, "AccessDeniedException"}},
	}
	for name, c := range cases {
		env := map[string]string{}
		for k, v := range base {
			env[k] = v
		}
		for k, v := range c.env {
			env[k] = v
		}
		_, _, err := setup(context.Background(), func(k string) string { return env[k] })
		if err == nil {
			t.Errorf("%s: set-up succeeded", name)
			continue
		}
		for _, w := range c.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%s: the error does not say %q: %v", name, w, err)
			}
		}
		if strings.Contains(err.Error(), pw) {
			t.Errorf("%s: the error quotes the password: %v", name, err)
		}
	}
}

// load is several senders delivering signed events to the receiver
// without pause, recording every answer.
type load struct {
	t        *testing.T
	mu       sync.Mutex
	answers  []answer
	accepted atomic.Int64
	refused  atomic.Int64
	stop     chan struct{}
	wg       sync.WaitGroup
	once     sync.Once
}

func startLoad(t *testing.T, h func(context.Context, events.APIGatewayV2HTTPRequest) (events.APIGatewayV2HTTPResponse, error), senders int) *load {
	template, src := stripeTemplate(t)
	l := &load{t: t, stop: make(chan struct{})}
	var next atomic.Int64
	for s := range senders {
		l.wg.Go(func() {
			for {
				select {
				case <-l.stop:
					return
				default:
				}
				n := next.Add(1)
				if n > 200_000 { // a bound, whatever happens
					return
				}
				a, err := deliver(context.Background(), h, template, src, fmt.Sprintf("evt_rotation_%d_%06d", s, n))
				if err != nil {
					t.Errorf("delivery: %v", err)
					return
				}
				l.mu.Lock()
				l.answers = append(l.answers, a)
				l.mu.Unlock()
				switch a.code {
				case 200:
					l.accepted.Add(1)
				case 503:
					l.refused.Add(1)
				}
			}
		})
	}
	t.Cleanup(l.end)
	return l
}

// end stops the senders and waits for them.
func (l *load) end() { l.once.Do(func() { close(l.stop); l.wg.Wait() }) }

// waitAccepted waits until n events more than now were accepted.
func (l *load) waitAccepted(n int64, what string) {
	l.t.Helper()
	target := l.accepted.Load() + n
	poll.Until(l.t, time.Minute, func() (bool, string) {
		return l.accepted.Load() >= target, fmt.Sprintf("%s: %d accepted, %d refused", what, l.accepted.Load(), l.refused.Load())
	})
}

// TestRotationUnderLoad changes the receiver's database password while
// four senders deliver without pause, as a rotation does it: ALTER ROLE
// (the rotation's setSecret), then the secret's new value (finishSecret),
// on a server that checks passwords and through the real SDK.
//
//   - While its sessions stay open, a password change costs nothing: no
//     503 (PostgreSQL keeps a session whose password changed).
//   - Rotation 1: the secret is updated, then the sessions end (a
//     failover, a proxy's timeout, a fresh container). The 503s are at
//     most 2 x the pool's size: the requests on the sessions that ended,
//     plus the logins already under way with the old password when the
//     first refusal came back; after that one re-read of the secret, and
//     every login uses the new password.
//   - Rotation 2: the sessions end inside the rotation's window (the
//     database has the new password, the secret the old one). Nothing can
//     log in until the secret changes, so every request in the window
//     gets 503; the credentials re-read the secret (finding the old
//     password, which doubles the wait to 2 s), and the receiver accepts
//     again within that wait after the secret changes: bounded by the
//     senders' rate x (window + wait), and the window is the rotation's.
//     Reads of the secret are never closer than a second.
//
// Every event answered 200 is stored, every 503 is database_unavailable
// with Retry-After, and each 503 event resent afterwards is stored: the
// sender's retry loses nothing. No restart anywhere.
func TestRotationUnderLoad(t *testing.T) {
	tier.Heavy(t, "a password rotation under load")
	t.Parallel()
	ctx := context.Background()
	db := setupPasswordDB(t, "password-1")
	arn := db.sm.Create(t, "webhook-inbox/receiver", credentials(db.role, "password-1"))
	getenv := db.env(arn)
	poolSize := int64(receiver.Config{}.Pool(storage.PoolConfig{}).MaxConns)
	h, closePool, err := setup(ctx, getenv)
	if err != nil {
		t.Fatal(err)
	}
	defer closePool()

	const senders = 4
	l := startLoad(t, h, senders)
	l.waitAccepted(50, "before any change")

	// The password changes while the sessions stay open.
	pgtest.SetPassword(t, db.admin, db.role, "password-2")
	refused := l.refused.Load()
	l.waitAccepted(200, "after ALTER ROLE, on the open sessions")
	if n := l.refused.Load() - refused; n != 0 {
		t.Fatalf("%d 503s while only the password changed: open sessions must keep working", n)
	}
	if n := db.sm.Fetches(arn); n != 1 {
		t.Fatalf("the secret was read %d times; once at init, and nothing was refused", n)
	}

	// Rotation 1: the secret holds the new password, then the sessions end.
	db.sm.Put(t, arn, credentials(db.role, "password-2"))
	refused = l.refused.Load()
	if n := pgtest.EndSessions(t, db.admin, db.role); n == 0 {
		t.Fatal("the receiver had no session to end")
	}
	l.waitAccepted(200, "after the sessions ended, secret updated")
	rotation1 := l.refused.Load() - refused
	if rotation1 > 2*poolSize {
		t.Errorf("rotation 1: %d 503s, want at most %d (2 x the pool's %d connections)", rotation1, 2*poolSize, poolSize)
	}
	if n := db.sm.Fetches(arn); n != 2 {
		t.Errorf("the secret was read %d times, want 2: at init, and once after the refusal", n)
	}

	// Rotation 2: the sessions end inside the rotation's window.
	pgtest.SetPassword(t, db.admin, db.role, "password-3")
	refused, reads := l.refused.Load(), db.sm.Fetches(arn)
	pgtest.EndSessions(t, db.admin, db.role)
	poll.Until(t, time.Minute, func() (bool, string) {
		return db.sm.Fetches(arn) > reads && l.refused.Load() > refused,
			fmt.Sprintf("a re-read of the secret and 503s in the window: reads %d, 503s %d", db.sm.Fetches(arn)-reads, l.refused.Load()-refused)
	})
	accepted := l.accepted.Load()
	put := time.Now()
	db.sm.Put(t, arn, credentials(db.role, "password-3"))
	poll.Until(t, time.Minute, func() (bool, string) {
		return l.accepted.Load() > accepted, "the receiver accepting again after the secret changed"
	})
	recovery := time.Since(put)
	// The re-read before the Put found the old password, so the next one
	// comes 2 s after it; the rest is a login and an insert, with slack for
	// a loaded machine.
	if limit := 2*secrets.RefreshWait + 3*time.Second; recovery > limit {
		t.Errorf("accepting again %s after the secret changed, want within %s", recovery, limit)
	}
	rotation2 := l.refused.Load() - refused
	refused = l.refused.Load()
	l.waitAccepted(200, "after rotation 2")
	// What can still be refused once one request was accepted: the
	// requests of the other senders already under way, whose logins began
	// with the old password (each sender has one in flight; a login begun
	// after the re-read uses the new one). The pool's size does not bound
	// them: a request counted after the first acceptance may have been
	// refused before it.
	if n := l.refused.Load() - refused; n > senders-1 {
		t.Errorf("%d 503s after the receiver recovered, want at most %d (the other senders' requests already under way with the old password)", n, senders-1)
	}
	l.end()

	times := db.sm.FetchTimes(arn)
	for i := 2; i < len(times); i++ {
		if gap := times[i].Sub(times[i-1]); gap < secrets.RefreshWait {
			t.Errorf("reads %d and %d of the secret %s apart, want at least %s", i, i+1, gap, secrets.RefreshWait)
		}
	}

	var retry []string
	for _, a := range l.answers {
		switch {
		case a.code == 200 && a.status == "accepted":
			if _, err := db.store.EventGetByKey(ctx, "stripe", a.id); err != nil {
				t.Errorf("%s was answered accepted but is not stored: %v", a.id, err)
			}
		case a.code == 503:
			if a.cause != "database_unavailable" || a.retry == "" {
				t.Errorf("%s: 503 without database_unavailable and Retry-After: %+v", a.id, a)
			}
			retry = append(retry, a.id)
		default:
			t.Errorf("%s: unexpected answer %+v", a.id, a)
		}
	}
	// The senders retry what got 503, with the receiver as it now is.
	template, src := stripeTemplate(t)
	for _, id := range retry {
		if a, err := deliver(ctx, h, template, src, id); err != nil || a.code != 200 {
			t.Errorf("the retry of %s: %+v %v", id, a, err)
		}
	}
	var rows int
	if err := db.store.Pool().QueryRow(ctx, `SELECT count(*) FROM webhook_events`).Scan(&rows); err != nil || rows != len(l.answers) {
		t.Errorf("rows = %d (%v), want one per event sent (%d)", rows, err, len(l.answers))
	}
	t.Logf("requests=%d accepted=%d 503s: rotation 1 %d (bound %d), rotation 2 %d (window and %s to recover); secret reads %d",
		len(l.answers), l.accepted.Load(), rotation1, 2*poolSize, rotation2, recovery.Round(time.Millisecond), len(times))
}
