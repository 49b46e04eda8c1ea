package secrets_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/secretsmanager"

	"github.com/webhook-inbox/webhook-inbox/shared/secrets"
)

// store is a Secrets Manager stand-in that counts fetches: the behaviour
// under test is which secrets are read, and how often, not the AWS API.
type store struct {
	values map[string]string
	calls  int
}

func (s *store) GetSecretValue(_ context.Context, in *secretsmanager.GetSecretValueInput, _ ...func(*secretsmanager.Options)) (*secretsmanager.GetSecretValueOutput, error) {
	s.calls++
	v, ok := s.values[aws.ToString(in.SecretId)]
	if !ok {
		return nil, errors.New("ResourceNotFoundException")
	}
	return &secretsmanager.GetSecretValueOutput{SecretString: aws.String(v)}, nil
}

func env(m map[string]string) func(string) string { return func(k string) string { return m[k] } }

func TestDatabaseURL(t *testing.T) {
	t.Parallel()
	cases := []struct{ in, ssl, want, err string }{
		{"postgres://u:p@h:5432/d?sslmode=verify-full", "", "postgres://u:p@h:5432/d?sslmode=verify-full", ""},
		{`{"username":"app","password":"p@ss/w:rd","host":"db.example.internal","port":5432,"dbname":"inbox","engine":"postgres"}`, "",
			"postgres://app:p%40ss%2Fw%3Ard@db.example.internal:5432/inbox?sslmode=require", ""},
		{`{"username":"app","password":"x","host":"proxy.example.internal","port":"6432"}`, "verify-full",
			"postgres://app:x@proxy.example.internal:6432/postgres?sslmode=verify-full", ""},
		{`{"username":"app","password":"x","host":"h","port":"many"}`, "", "", "port"},
		{`{"password":"x"}`, "", "", "lacks username or host"},
		{`hunter2`, "", "", "neither"},
	}
	for _, c := range cases {
		got, err := secrets.DatabaseURL(c.in, c.ssl)
		if c.err != "" {
			if err == nil || !strings.Contains(err.Error(), c.err) {
				t.Errorf("DatabaseURL(%s) error = %v, want %q", c.in, err, c.err)
			}
			if err != nil && (strings.Contains(err.Error(), "hunter2") || strings.Contains(err.Error(), `"x"`)) {
				t.Errorf("error leaks the secret: %v", err)
			}
			continue
		}
		if err != nil || got != c.want {
			t.Errorf("DatabaseURL(%s) = %q, %v; want %q", c.in, got, err, c.want)
		}
	}
}

func TestOverlay(t *testing.T) {
	t.Parallel()
	sm := &store{values: map[string]string{
		"arn:db":      `{"username":"app","password":"pw","host":"db","port":5432,"dbname":"inbox"}`,
		"arn:sources": `{"sources":{}}`,
	}}
	ctx := context.Background()
	get, err := secrets.Overlay(ctx, env(map[string]string{
		secrets.EnvDatabaseSecretARN: "arn:db", secrets.EnvSourcesSecretARN: "arn:sources", "OTHER": "x",
	}), sm)
	if err != nil {
		t.Fatal(err)
	}
	if get("DATABASE_URL") != "postgres://app:pw@db:5432/inbox?sslmode=require" || get("WEBHOOK_SOURCES") != `{"sources":{}}` || get("OTHER") != "x" {
		t.Fatalf("overlay: %q %q", get("DATABASE_URL"), get("WEBHOOK_SOURCES"))
	}
	get("DATABASE_URL")
	if sm.calls != 2 {
		t.Fatalf("fetches = %d; each secret must be read once, at init", sm.calls)
	}

	// Plain variables win, and then nothing is fetched.
	sm.calls = 0
	plain := env(map[string]string{"DATABASE_URL": "postgres://local", secrets.EnvDatabaseSecretARN: "arn:db",
		"WEBHOOK_SOURCES_FILE": "dev/sources.json", secrets.EnvSourcesSecretARN: "arn:sources"})
	if secrets.Needed(plain) {
		t.Fatal("Needed with plain variables set")
	}
	get, err = secrets.Overlay(ctx, plain, nil)
	if err != nil || get("DATABASE_URL") != "postgres://local" || sm.calls != 0 {
		t.Fatalf("plain: %v %q calls=%d", err, get("DATABASE_URL"), sm.calls)
	}

	// A missing secret is a start-up error naming it.
	_, err = secrets.Overlay(ctx, env(map[string]string{secrets.EnvDatabaseSecretARN: "arn:missing"}), sm)
	if err == nil || !strings.Contains(err.Error(), "arn:missing") {
		t.Fatalf("missing secret: %v", err)
	}
}
