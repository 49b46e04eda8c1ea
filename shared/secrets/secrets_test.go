package secrets_test

import (
	"context"
	"errors"
	"net/url"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/secretsmanager"

	"github.com/webhook-inbox/webhook-inbox/internal/testkit/s3test"
	"github.com/webhook-inbox/webhook-inbox/internal/testkit/secretstest"
	"github.com/webhook-inbox/webhook-inbox/shared/secrets"
	"github.com/webhook-inbox/webhook-inbox/shared/storage"
)

// The secrets are read through the real SDK client from the Secrets
// Manager stand-in, as a Lambda reads them from the service.
func TestMain(m *testing.M) {
	secretstest.Use()
	os.Exit(m.Run())
}

type fixture struct {
	t  *testing.T
	sm *secretstest.Server
}

func setup(t *testing.T) *fixture {
	t.Helper()
	return &fixture{t: t, sm: secretstest.Shared(t)}
}

// secret creates a secret holding value and returns its ARN.
func (f *fixture) secret(value string) string {
	f.t.Helper()
	return f.sm.Create(f.t, "db", value)
}

// environment runs Environment on env, in the region a Lambda's
// environment names unless env says otherwise.
func (f *fixture) environment(env map[string]string) (func(string) string, storage.Credentials, error) {
	f.t.Helper()
	if _, ok := env[secrets.EnvRegion]; !ok {
		env[secrets.EnvRegion] = secretstest.Region
	}
	return secrets.Environment(context.Background(), func(k string) string { return env[k] })
}

// login asks creds for a connection to the URL's endpoint as its user, as
// the pool does.
func login(t *testing.T, creds storage.Credentials, dbURL string) (string, string) {
	t.Helper()
	u, err := url.Parse(dbURL)
	if err != nil {
		t.Fatal(err)
	}
	port := 5432
	if p := u.Port(); p != "" {
		if port, err = strconv.Atoi(p); err != nil {
			t.Fatal(err)
		}
	}
	user, password, err := creds.Login(context.Background(), u.Hostname(), uint16(port), u.User.Username())
	if err != nil {
		t.Fatal(err)
	}
	return user, password
}

const proxy = "inbox.proxy-c0ffee.eu-west-1.rds.amazonaws.com"

// TestDatabaseConnection: every shape of secret, with the environment
// filling in what it lacks and winning over what it says, gives a URL
// without a password and credentials that log in with the secret's.
func TestDatabaseConnection(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name           string
		secret         string
		env            map[string]string
		url            string
		user, password string
	}{
		{"RDS credentials JSON", `{"username":"app","password":"p@ss/w:rd","host":"db.example.internal","port":5432,"dbname":"inbox","engine":"postgres"}`, nil,
			"postgres://app@db.example.internal:5432/inbox?sslmode=verify-full", "app", "p@ss/w:rd"},
		{"RDS-managed secret: username and password only", `{"username":"postgres","password":"managed"}`,
			map[string]string{"DATABASE_HOST": "cluster.example.internal", "DATABASE_PORT": "5433", "DATABASE_NAME": "inbox"},
			"postgres://postgres@cluster.example.internal:5433/inbox?sslmode=verify-full", "postgres", "managed"},
		{"RDS-managed secret, default port and database", `{"username":"postgres","password":"managed"}`,
			map[string]string{"DATABASE_HOST": "cluster.example.internal"},
			"postgres://postgres@cluster.example.internal:5432/postgres?sslmode=verify-full", "postgres", "managed"},
		{"the environment wins: the role through the proxy", `{"username":"webhook_receiver","password":"x","host":"cluster.example.internal","port":5432,"dbname":"inbox"}`,
			map[string]string{"DATABASE_HOST": proxy, "DATABASE_SSLMODE": "verify-full"},
			"postgres://webhook_receiver@" + proxy + ":5432/inbox?sslmode=verify-full", "webhook_receiver", "x"},
		{"a port written as a string", `{"username":"app","password":"x","host":"h","port":"6432"}`, nil,
			"postgres://app@h:6432/postgres?sslmode=verify-full", "app", "x"},
		{"a URL secret keeps its settings", "postgres://u:p%40ss@h:6432/d?sslmode=verify-full&application_name=x", nil,
			"postgres://u@h:6432/d?sslmode=verify-full&application_name=x", "u", "p@ss"},
		{"a URL secret with host and database from the environment", "postgresql://u:pw@old.example:5432/old", map[string]string{"DATABASE_HOST": "new.example", "DATABASE_NAME": "inbox"},
			"postgres://u@new.example:5432/inbox?sslmode=verify-full", "u", "pw"},
		// DATABASE_SSLMODE is the sslmode written when none is, and the
		// floor a URL secret's own must reach.
		{"a JSON secret under DATABASE_SSLMODE=require", `{"username":"app","password":"x","host":"h"}`, map[string]string{"DATABASE_SSLMODE": "require"},
			"postgres://app@h:5432/postgres?sslmode=require", "app", "x"},
		{"a URL secret without sslmode takes DATABASE_SSLMODE's", "postgres://u:pw@h/d?application_name=x", map[string]string{"DATABASE_SSLMODE": "verify-ca"},
			"postgres://u@h:5432/d?application_name=x&sslmode=verify-ca", "u", "pw"},
		{"a URL secret's require, accepted by DATABASE_SSLMODE=require", "postgres://u:pw@h/d?sslmode=require", map[string]string{"DATABASE_SSLMODE": "require"},
			"postgres://u@h:5432/d?sslmode=require", "u", "pw"},
		{"a URL secret's verify-full above DATABASE_SSLMODE=require", "postgres://u:pw@h/d?sslmode=verify-full", map[string]string{"DATABASE_SSLMODE": "require"},
			"postgres://u@h:5432/d?sslmode=verify-full", "u", "pw"},
		{"a URL secret's plaintext, accepted by DATABASE_SSLMODE=disable", "postgres://u:pw@h/d?sslmode=disable", map[string]string{"DATABASE_SSLMODE": "disable"},
			"postgres://u@h:5432/d?sslmode=disable", "u", "pw"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			f := setup(t)
			arn := f.secret(c.secret)
			env := map[string]string{"DATABASE_SECRET_ARN": arn, "OTHER": "kept"}
			for k, v := range c.env {
				env[k] = v
			}
			getenv, creds, err := f.environment(env)
			if err != nil {
				t.Fatal(err)
			}
			if got := getenv("DATABASE_URL"); got != c.url {
				t.Errorf("DATABASE_URL = %s, want %s", got, c.url)
			}
			if u, err := url.Parse(getenv("DATABASE_URL")); err != nil || u.User == nil || u.User.String() != url.User(c.user).String() {
				t.Errorf("the URL's user part is not the user alone (no password): %v", err)
			}
			if getenv("OTHER") != "kept" {
				t.Error("the overlay lost a variable")
			}
			for range 3 { // every connection asks; none reads the secret again
				if user, password := login(t, creds, getenv("DATABASE_URL")); user != c.user || password != c.password {
					t.Fatalf("login = %q %q, want %q %q", user, password, c.user, c.password)
				}
			}
			if n := f.sm.Fetches(arn); n != 1 {
				t.Errorf("the secret was read %d times, want once, at init", n)
			}
		})
	}
}

// TestIAMAuthentication: with DATABASE_IAM_AUTH=true no secret is needed;
// each login mints a token for the endpoint connected to (an RDS Proxy
// here, whose endpoint is the host the token is signed for), for the
// role DATABASE_USER names, in the function's region.
func TestIAMAuthentication(t *testing.T) {
	t.Parallel()
	f := setup(t)
	getenv, creds, err := f.environment(map[string]string{
		"DATABASE_IAM_AUTH": "true", "DATABASE_USER": "webhook_receiver", "DATABASE_HOST": proxy, "DATABASE_NAME": "inbox",
	})
	if err != nil {
		t.Fatal(err)
	}
	want := "postgres://webhook_receiver@" + proxy + ":5432/inbox?sslmode=verify-full"
	if got := getenv("DATABASE_URL"); got != want {
		t.Fatalf("DATABASE_URL = %s, want %s", got, want)
	}
	user, token := login(t, creds, want)
	if user != "webhook_receiver" || !strings.HasPrefix(token, proxy+":5432?Action=connect&DBUser=webhook_receiver&") ||
		!strings.Contains(token, "%2F"+secretstest.Region+"%2Frds-db%2Faws4_request") || !strings.Contains(token, "X-Amz-Signature=") {
		t.Fatalf("login = %q, token %q: want a token signed for %s as webhook_receiver in %s", user, token, proxy, secretstest.Region)
	}
	if _, again := login(t, creds, want); again == "" {
		t.Fatal("no second token")
	}
	creds.Refused(token) // nothing to read again: each connection mints its own

	// A secret may name the user (and the endpoint); DATABASE_USER wins.
	arn := f.secret(`{"username":"from_secret","host":"cluster.example.internal","dbname":"inbox"}`)
	getenv, creds, err = f.environment(map[string]string{"DATABASE_IAM_AUTH": "true", "DATABASE_SECRET_ARN": arn})
	if err != nil {
		t.Fatal(err)
	}
	if got := getenv("DATABASE_URL"); got != "postgres://from_secret@cluster.example.internal:5432/inbox?sslmode=verify-full" {
		t.Fatalf("DATABASE_URL = %s", got)
	}
	if user, _ := login(t, creds, getenv("DATABASE_URL")); user != "from_secret" {
		t.Fatalf("user = %s", user)
	}
	getenv, _, err = f.environment(map[string]string{"DATABASE_IAM_AUTH": "true", "DATABASE_SECRET_ARN": arn, "DATABASE_USER": "webhook_archiver"})
	if err != nil || !strings.HasPrefix(getenv("DATABASE_URL"), "postgres://webhook_archiver@") {
		t.Fatalf("DATABASE_USER over the secret's: %v %s", err, getenv("DATABASE_URL"))
	}
}

// TestDatabaseURLIsUsedAsIs: a DATABASE_URL (make dev, tests, an
// operator's own) wins, and nothing is fetched for the database.
func TestDatabaseURLIsUsedAsIs(t *testing.T) {
	t.Parallel()
	f := setup(t)
	arn := f.secret(`{"username":"app","password":"x","host":"h"}`)
	getenv, creds, err := f.environment(map[string]string{"DATABASE_URL": "postgres://local/x", "DATABASE_SECRET_ARN": arn, "DATABASE_HOST": "elsewhere"})
	if err != nil || getenv("DATABASE_URL") != "postgres://local/x" || creds != nil || f.sm.Fetches(arn) != 0 {
		t.Fatalf("getenv=%q creds=%v err=%v fetches=%d", getenv("DATABASE_URL"), creds, err, f.sm.Fetches(arn))
	}
	// With IAM authentication the URL names the user, tokens the password.
	getenv, creds, err = f.environment(map[string]string{"DATABASE_URL": "postgres://app@h/x?sslmode=require", "DATABASE_IAM_AUTH": "true"})
	if err != nil || creds == nil || getenv("DATABASE_URL") != "postgres://app@h/x?sslmode=require" {
		t.Fatalf("DATABASE_URL with IAM: %v %v", creds, err)
	}
	// Nothing to resolve: the environment as it is, and no AWS at all.
	getenv, creds, err = secrets.Environment(context.Background(), func(k string) string {
		return map[string]string{"DATABASE_URL": "postgres://local/x"}[k]
	})
	if err != nil || creds != nil || getenv("DATABASE_URL") != "postgres://local/x" {
		t.Fatalf("plain: %v %v", creds, err)
	}
}

// TestDatabaseFailures: each mistake fails at init with an error naming
// the variable or the secret at fault, never quoting a password.
func TestDatabaseFailures(t *testing.T) {
	t.Parallel()
	const pw = "hunter2"
	cases := []struct {
		name   string
		secret string // "" for no secret
		env    map[string]string
		want   []string
	}{
		{"a secret without a password", `{"username":"app","host":"h"}`, nil, []string{"DATABASE_SECRET_ARN", "has no password"}},
		{"a secret without a username", `{"password":"hunter2","host":"h"}`, nil, []string{"DATABASE_SECRET_ARN", "has no username"}},
		{"a secret that is no credentials document", pw, nil, []string{"DATABASE_SECRET_ARN", "neither a postgres:// URL nor a JSON"}},
		{"a URL secret that does not parse", "postgres://app:hunter2@h:port/x", nil, []string{"DATABASE_SECRET_ARN", "not a valid URL"}},
		{"a secret's port that is not one", `{"username":"app","password":"hunter2","host":"h","port":"many"}`, nil, []string{"DATABASE_SECRET_ARN", "port is not a port number"}},
		{"a bad DATABASE_PORT", `{"username":"app","password":"hunter2"}`, map[string]string{"DATABASE_HOST": "h", "DATABASE_PORT": "54x"},
			[]string{`DATABASE_PORT must be a port number from 1 to 65535, got "54x"`}},
		{"an RDS-managed secret without DATABASE_HOST", `{"username":"app","password":"hunter2"}`, nil, []string{"DATABASE_HOST is not set", "names no host"}},
		{"settings pgx refuses", "postgres://app:hunter2@h:5432/x?sslmode=sometimes", nil, []string{"DATABASE_SECRET_ARN", "is not valid", "sslmode"}},
		{"DATABASE_USER with a secret", `{"username":"app","password":"hunter2","host":"h"}`, map[string]string{"DATABASE_USER": "other"},
			[]string{"DATABASE_USER is read only with DATABASE_IAM_AUTH=true"}},
		{"IAM without DATABASE_USER", "", map[string]string{"DATABASE_IAM_AUTH": "true", "DATABASE_HOST": proxy}, []string{"DATABASE_IAM_AUTH=true needs DATABASE_USER"}},
		{"IAM without DATABASE_HOST", "", map[string]string{"DATABASE_IAM_AUTH": "true", "DATABASE_USER": "app"}, []string{"DATABASE_IAM_AUTH=true needs DATABASE_HOST"}},
		{"IAM without a region", "", map[string]string{"DATABASE_IAM_AUTH": "true", "DATABASE_USER": "app", "DATABASE_HOST": proxy, "AWS_REGION": ""},
			[]string{"DATABASE_IAM_AUTH=true needs AWS_REGION"}},
		{"IAM with a secret naming no user", `{"host":"h"}`, map[string]string{"DATABASE_IAM_AUTH": "true"}, []string{"DATABASE_USER is not set", "has no username"}},
		{"DATABASE_IAM_AUTH not a boolean", "", map[string]string{"DATABASE_IAM_AUTH": "yes please", "DATABASE_USER": "app", "DATABASE_HOST": "h"},
			[]string{`DATABASE_IAM_AUTH must be true or false, got "yes please"`}},
		{"a host but no way to log in", "", map[string]string{"DATABASE_HOST": proxy}, []string{"DATABASE_HOST is set, but neither DATABASE_SECRET_ARN nor DATABASE_IAM_AUTH=true"}},
		// A URL secret cannot lower TLS below DATABASE_SSLMODE (default
		// verify-full): each weaker sslmode fails at init, naming the
		// secret and the setting that would accept it.
		{"a URL secret's sslmode=require", "postgres://app:hunter2@db.example.internal/x?sslmode=require", nil,
			[]string{"DATABASE_SECRET_ARN", "sslmode=require", "without checking the server's certificate", "DATABASE_SSLMODE (default verify-full)", "set DATABASE_SSLMODE=require"}},
		{"a URL secret's sslmode=disable", "postgres://app:hunter2@db.example.internal/x?sslmode=disable", nil,
			[]string{"DATABASE_SECRET_ARN", "sslmode=disable", "plaintext", "set DATABASE_SSLMODE=disable"}},
		{"a URL secret's sslmode=prefer", "postgres://app:hunter2@db.example.internal/x?sslmode=prefer", nil,
			[]string{"DATABASE_SECRET_ARN", "sslmode=prefer", "fall back to plaintext", "set DATABASE_SSLMODE=disable"}},
		{"a URL secret's sslmode=allow", "postgres://app:hunter2@db.example.internal/x?sslmode=allow", nil,
			[]string{"DATABASE_SECRET_ARN", "sslmode=allow", "set DATABASE_SSLMODE=disable"}},
		{"a URL secret's sslmode=verify-ca", "postgres://app:hunter2@db.example.internal/x?sslmode=verify-ca", nil,
			[]string{"DATABASE_SECRET_ARN", "sslmode=verify-ca", "not that it names the host", "set DATABASE_SSLMODE=verify-ca"}},
		{"a URL secret's prefer over several hosts", "postgres://app:hunter2@a.example:5432,b.example:5432/x?sslmode=prefer", map[string]string{"DATABASE_SSLMODE": "require"},
			[]string{"DATABASE_SECRET_ARN", "sslmode=prefer", "DATABASE_SSLMODE=require accepts nothing weaker than require", "set DATABASE_SSLMODE=disable"}},
		{"a URL secret's require under DATABASE_SSLMODE=verify-ca", "postgres://app:hunter2@h/x?sslmode=require", map[string]string{"DATABASE_SSLMODE": "verify-ca"},
			[]string{"DATABASE_SECRET_ARN", "DATABASE_SSLMODE=verify-ca accepts nothing weaker", "set DATABASE_SSLMODE=require"}},
		{"DATABASE_SSLMODE=prefer", `{"username":"app","password":"hunter2","host":"h"}`, map[string]string{"DATABASE_SSLMODE": "prefer"},
			[]string{`DATABASE_SSLMODE must be one of disable, require, verify-ca, verify-full; got "prefer"`}},
		{"every problem at once", "", map[string]string{"DATABASE_IAM_AUTH": "true", "DATABASE_PORT": "0"},
			[]string{"DATABASE_PORT must be", "needs DATABASE_USER", "needs DATABASE_HOST"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			f := setup(t)
			env := map[string]string{}
			for k, v := range c.env {
				env[k] = v
			}
			want := c.want
			if c.secret != "" {
				arn := f.secret(c.secret)
				env["DATABASE_SECRET_ARN"] = arn
				if strings.Contains(strings.Join(c.want, " "), "DATABASE_SECRET_ARN") {
					want = append(want, arn)
				}
			}
			_, _, err := f.environment(env)
			if err == nil {
				t.Fatal("accepted")
			}
			for _, w := range want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error does not say %q:\n%v", w, err)
				}
			}
			if strings.Contains(err.Error(), pw) {
				t.Errorf("error quotes the password:\n%v", err)
			}
		})
	}
}

// TestSecretThatCannotBeRead: a secret that does not exist, or that the
// function's role may not read, fails at init naming the variable, the
// secret and the service's reason.
func TestSecretThatCannotBeRead(t *testing.T) {
	t.Parallel()
	f := setup(t)
	missing := "arn:aws:secretsmanager:" + secretstest.Region + ":" + secretstest.Account + ":secret:no-such-secret-AbCdEf"
	denied := f.secret(`{"username":"app","password":"hunter2","host":"h"}`)
	f.sm.Deny(t, denied)
	for arn, reason := range map[string]string{missing: "ResourceNotFoundException", denied: "AccessDeniedException"} {
		_, _, err := f.environment(map[string]string{"DATABASE_SECRET_ARN": arn})
		if err == nil || !strings.Contains(err.Error(), "DATABASE_SECRET_ARN: read secret "+arn) || !strings.Contains(err.Error(), reason) {
			t.Errorf("%s: %v, want the variable, the secret and %s", arn, err, reason)
		}
	}
	_, _, err := f.environment(map[string]string{"WEBHOOK_SOURCES_SECRET_ARN": missing})
	if err == nil || !strings.Contains(err.Error(), "WEBHOOK_SOURCES_SECRET_ARN: read secret "+missing) {
		t.Errorf("sources: %v", err)
	}
}

// TestSourcesSecret: the sources document is read once, at init, unless a
// plain variable gives it.
func TestSourcesSecret(t *testing.T) {
	t.Parallel()
	f := setup(t)
	arn := f.sm.Create(t, "sources", `{"sources":{}}`)
	getenv, creds, err := f.environment(map[string]string{"WEBHOOK_SOURCES_SECRET_ARN": arn, "DATABASE_URL": "postgres://local/x"})
	if err != nil || getenv("WEBHOOK_SOURCES") != `{"sources":{}}` || creds != nil {
		t.Fatalf("%v %q", err, getenv("WEBHOOK_SOURCES"))
	}
	getenv("WEBHOOK_SOURCES")
	if n := f.sm.Fetches(arn); n != 1 {
		t.Fatalf("fetches = %d, want 1", n)
	}
	getenv, _, err = f.environment(map[string]string{"WEBHOOK_SOURCES_SECRET_ARN": arn, "WEBHOOK_SOURCES_FILE": "dev/sources.json"})
	if err != nil || getenv("WEBHOOK_SOURCES") != "" || f.sm.Fetches(arn) != 1 {
		t.Fatalf("a plain variable must win and nothing be fetched: %v %d", err, f.sm.Fetches(arn))
	}
}

// TestRereadAfterRefusal: the credentials read the secret again only when
// the database refused the password they hold: the first time at once,
// then at most once a second, doubling the wait while the secret still
// holds the refused password (a rotation under way, or a wrong password)
// up to RefreshMaxWait, and starting over once it changes; a secret that
// cannot be read fails the connection and is tried again after the wait.
func TestRereadAfterRefusal(t *testing.T) {
	t.Parallel()
	f := setup(t)
	arn := f.secret(`{"username":"app","password":"one"}`)
	getenv, creds, err := f.environment(map[string]string{"DATABASE_SECRET_ARN": arn, "DATABASE_HOST": "h"})
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	secrets.SetClock(creds, func() time.Time { return now })
	dbURL := getenv("DATABASE_URL")
	expect := func(password string, fetches int) {
		t.Helper()
		if _, got := login(t, creds, dbURL); got != password {
			t.Fatalf("at +%s: password %q, want %q", time.Since(now).Round(time.Millisecond), got, password)
		}
		if n := f.sm.Fetches(arn); n != fetches {
			t.Fatalf("fetches = %d, want %d", n, fetches)
		}
	}
	expect("one", 1)

	// A new version in the secret changes nothing until the database
	// refuses the password held, and a refusal of another password (a
	// connection made before the last read) does not count.
	f.sm.Put(t, arn, `{"username":"app","password":"two"}`)
	creds.Refused("zero")
	expect("one", 1)
	creds.Refused("one")
	expect("two", 2) // the first re-read waits for nothing
	creds.Refused("two")
	expect("two", 2) // the next waits a second

	// A rotation under way: the database has "three", the secret still
	// "two". Each re-read finds nothing new and doubles the wait.
	var waits []time.Duration
	last := now
	for len(waits) < 7 {
		creds.Refused("two")
		for before := f.sm.Fetches(arn); f.sm.Fetches(arn) == before; now = now.Add(250 * time.Millisecond) {
			if _, got := login(t, creds, dbURL); got != "two" {
				t.Fatalf("password %q, want two", got)
			}
			if f.sm.Fetches(arn) != before {
				waits = append(waits, now.Sub(last))
				last = now
			}
		}
	}
	want := []time.Duration{time.Second, 2 * time.Second, 4 * time.Second, 8 * time.Second, 10 * time.Second, 10 * time.Second, 10 * time.Second}
	if !slices.Equal(waits, want) {
		t.Fatalf("waits between re-reads = %v, want %v", waits, want)
	}

	// The rotation ends: the next re-read finds "three", and the wait is
	// one second again.
	f.sm.Put(t, arn, `{"username":"app","password":"three"}`)
	creds.Refused("two")
	now = now.Add(secrets.RefreshMaxWait)
	expect("three", 10)
	creds.Refused("three")
	expect("three", 10)
	now = now.Add(secrets.RefreshWait)
	expect("three", 11)

	// The secret cannot be read: the connection fails, naming the secret;
	// the credentials keep the password they hold and try again after the
	// (doubled) wait.
	f.sm.Deny(t, arn)
	creds.Refused("three")
	now = now.Add(2 * secrets.RefreshWait)
	u, _ := url.Parse(dbURL)
	if _, _, err := creds.Login(context.Background(), u.Hostname(), 5432, "app"); err == nil || !strings.Contains(err.Error(), arn) || !strings.Contains(err.Error(), "AccessDeniedException") {
		t.Fatalf("login with an unreadable secret: %v", err)
	}
	expect("three", 12)
	now = now.Add(4 * secrets.RefreshWait)
	if _, _, err := creds.Login(context.Background(), u.Hostname(), 5432, "app"); err == nil || f.sm.Fetches(arn) != 13 {
		t.Fatalf("the next try: %v, fetches %d", err, f.sm.Fetches(arn))
	}
}

// TestSourcesObject: the sources document read from its S3 copy (the
// control bucket's config/sources.json, which the relay keeps), through
// the S3 settings the archive uses; a plain variable wins, the secret and
// the copy together are refused, and a missing copy fails start-up.
func TestSourcesObject(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("needs versitygw")
	}
	f := setup(t)
	srv := s3test.Server(t)
	bucket := s3test.Bucket(t, srv)
	const doc = `{"sources":{"stripe":{"kind":"stripe","secrets":["whsec_from_the_copy_0123456789"]}}}`
	if _, err := s3test.Open(t, bucket).Put(context.Background(), "config/sources.json", []byte(doc), "application/json"); err != nil {
		t.Fatal(err)
	}
	env := func(kv ...string) map[string]string {
		m := map[string]string{"DATABASE_URL": "postgres://local/x", "S3_ENDPOINT": bucket.Endpoint,
			"S3_ACCESS_KEY_ID": bucket.AccessKeyID, "S3_SECRET_ACCESS_KEY": bucket.SecretAccessKey, secrets.EnvRegion: bucket.Region}
		for i := 0; i < len(kv); i += 2 {
			m[kv[i]] = kv[i+1]
		}
		return m
	}
	object := "s3://" + bucket.Bucket + "/config/sources.json"
	getenv, _, err := f.environment(env(secrets.EnvSourcesObject, object))
	if err != nil || getenv("WEBHOOK_SOURCES") != doc {
		t.Fatalf("from the copy: %v %q", err, getenv("WEBHOOK_SOURCES"))
	}
	getenv, _, err = f.environment(env(secrets.EnvSourcesObject, object, "WEBHOOK_SOURCES_FILE", "dev/sources.json"))
	if err != nil || getenv("WEBHOOK_SOURCES") != "" {
		t.Fatalf("a plain variable must win: %v", err)
	}
	for name, e := range map[string]map[string]string{
		"both places":   env(secrets.EnvSourcesObject, object, secrets.EnvSourcesSecretARN, f.sm.Create(t, "sources", doc)),
		"not a URL":     env(secrets.EnvSourcesObject, bucket.Bucket+"/config/sources.json"),
		"no key":        env(secrets.EnvSourcesObject, "s3://"+bucket.Bucket),
		"no such copy":  env(secrets.EnvSourcesObject, "s3://"+bucket.Bucket+"/config/missing.json"),
		"no such place": env(secrets.EnvSourcesObject, "s3://no-such-bucket-here/config/sources.json"),
	} {
		if _, _, err := f.environment(e); err == nil {
			t.Errorf("%s: accepted", name)
		} else if strings.Contains(err.Error(), "whsec_") {
			t.Errorf("%s: the error shows a secret: %v", name, err)
		}
	}
}

// mapGetter serves secrets from memory: what the migration function's
// front hands the apply mode.
type mapGetter map[string]string

func (m mapGetter) GetSecretValue(_ context.Context, in *secretsmanager.GetSecretValueInput, _ ...func(*secretsmanager.Options)) (*secretsmanager.GetSecretValueOutput, error) {
	v, ok := m[aws.ToString(in.SecretId)]
	if !ok {
		return nil, errors.New("not given")
	}
	return &secretsmanager.GetSecretValueOutput{SecretString: aws.String(v)}, nil
}

// TestEnvironmentFrom: the secrets are read from the Getter given, never
// from Secrets Manager; the connection is built as Environment builds it.
func TestEnvironmentFrom(t *testing.T) {
	t.Parallel()
	const arn = "arn:aws:secretsmanager:eu-west-1:123456789012:secret:rds!cluster-1-AbCdEf"
	env := map[string]string{secrets.EnvDatabaseSecretARN: arn, secrets.EnvDatabaseHost: proxy, secrets.EnvDatabaseSSLMode: "require"}
	getenv, creds, err := secrets.EnvironmentFrom(context.Background(), func(k string) string { return env[k] },
		mapGetter{arn: `{"username":"postgres","password":"pw-from-the-front"}`})
	if err != nil {
		t.Fatal(err)
	}
	dbURL := getenv(storage.EnvDatabaseURL)
	if dbURL != "postgres://postgres@"+proxy+":5432/postgres?sslmode=require" {
		t.Fatalf("URL %q", dbURL)
	}
	if user, pw := login(t, creds, dbURL); user != "postgres" || pw != "pw-from-the-front" {
		t.Fatalf("login %q %q", user, pw)
	}
	if n := secretstest.Shared(t).Fetches(arn); n != 0 {
		t.Fatalf("Secrets Manager was asked %d times", n)
	}
	if _, _, err := secrets.EnvironmentFrom(context.Background(), func(k string) string { return env[k] }, mapGetter{}); err == nil ||
		!strings.Contains(err.Error(), "DATABASE_SECRET_ARN: read secret "+arn+": not given") {
		t.Fatalf("a secret not given: %v", err)
	}
}
