package devstack_test

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/webhook-inbox/webhook-inbox/internal/devstack"
	"github.com/webhook-inbox/webhook-inbox/internal/testkit/field"
	"github.com/webhook-inbox/webhook-inbox/shared/archive"
	"github.com/webhook-inbox/webhook-inbox/shared/blobstore"
	"github.com/webhook-inbox/webhook-inbox/shared/lambdadb"
	"github.com/webhook-inbox/webhook-inbox/shared/migrator"
	"github.com/webhook-inbox/webhook-inbox/shared/processor"
	"github.com/webhook-inbox/webhook-inbox/shared/receiver"
	"github.com/webhook-inbox/webhook-inbox/shared/settings"
	"github.com/webhook-inbox/webhook-inbox/shared/source"
	"github.com/webhook-inbox/webhook-inbox/shared/storage"
	"github.com/webhook-inbox/webhook-inbox/shared/wake"
)

// lambdaConfigs are the calls the Lambda mains (functions/*/main.go) read
// their configuration with: each component's settings and what its
// dependencies are opened from. Every variable they read is one make dev
// must honour; a variable a new version reads is picked up here by itself.
var lambdaConfigs = []func(getenv func(string) string) error{
	func(g func(string) string) error { _, err := settings.LogLevel(g); return err },
	func(g func(string) string) error { _, err := receiver.ConfigFromEnv(g); return err },
	// functions/processor: its settings, and what it runs on, each read by
	// its own package.
	func(g func(string) string) error {
		_, err := processor.ConfigFromEnv(g)
		_, dbErr := storage.PoolConfigFromEnv(g)
		_, wakeErr := wake.ConfigFromEnv(g)
		var s3Err error
		if g(blobstore.EnvBucket) != "" {
			_, s3Err = blobstore.ConfigFromEnv(g)
		}
		return errors.Join(err, dbErr, wakeErr, s3Err)
	},
	func(g func(string) string) error { _, err := archive.ConfigFromEnv(g); return err },
	func(g func(string) string) error { _, err := storage.PoolConfigFromEnv(g); return err },
	func(g func(string) string) error { _, err := source.Load(g); return err },
	func(g func(string) string) error { _, err := blobstore.ConfigFromEnv(g); return err },
	func(g func(string) string) error { _, err := wake.ConfigFromEnv(g); return err },
}

// lambdaVariables returns every variable the Lambdas' configuration reads
// from the environments given.
func lambdaVariables(envs ...map[string]string) []string {
	read := map[string]bool{}
	for _, env := range envs {
		for _, config := range lambdaConfigs {
			_ = config(func(k string) string { read[k] = true; return env[k] })
		}
	}
	var out []string
	for k := range read {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// sample is a valid value, not the dev stack's default, for a variable,
// with the variables it needs beside it.
type sample struct {
	value string
	with  map[string]string
}

// samples holds one for every variable the Lambdas read. A variable
// missing here fails TestDevStackHonoursEveryLambdaVariable: add one.
func samples(t *testing.T) map[string]sample {
	other := filepath.Join(t.TempDir(), "sources.json")
	if err := os.WriteFile(other, []byte(`{"sources":{"only-here":{"kind":"github","secrets":["x_0123456789abcd"]}}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	return map[string]sample{
		"LOG_LEVEL":                   {value: "debug"},
		"AWS_LAMBDA_LOG_LEVEL":        {value: "DEBUG"},
		"DATABASE_URL":                {value: "postgres://someone@db.example:5432/other"},
		"DATABASE_QUERY_MODE":         {value: "exec"},
		"DATABASE_SSLMODE":            {value: "require"},
		"WEBHOOK_SOURCES":             {value: `{"sources":{"inline":{"kind":"stripe","secrets":["whsec_x_0123456789abcdefghijkl"]}}}`},
		"WEBHOOK_SOURCES_FILE":        {value: other},
		"WEBHOOK_MAX_BODY_BYTES":      {value: "2048"},
		"WEBHOOK_STORE_TIMEOUT":       {value: "9s"},
		"SOURCES_REFRESH_INTERVAL":    {value: "5m"},
		"METRICS_NAMESPACE":           {value: "Acme/Hooks"},
		"PROCESSOR_BATCH_SIZE":        {value: "10"},
		"PROCESSOR_MAX_ATTEMPTS":      {value: "5"},
		"PROCESSOR_BODY_BUDGET":       {value: "1048576"},
		"PROCESSOR_BACKOFF_BASE":      {value: "1s"},
		"PROCESSOR_BACKOFF_CAP":       {value: "1m"},
		"PROCESSOR_LEASE":             {value: "5m"},
		"PROCESSOR_HANDLER_TIMEOUT":   {value: "20s"},
		"PROCESSOR_SAFETY_MARGIN":     {value: "50s"},
		"PROCESSOR_UNHANDLED":         {value: "retry"},
		"PROCESSOR_POLL_INTERVAL":     {value: "300ms"},
		"PROCESSOR_RUN_FOR":           {value: "0"},
		"ARCHIVE_BUCKET":              {value: "my-bucket"},
		"ARCHIVE_PREFIX":              {value: "elsewhere"},
		"ARCHIVE_MIN_AGE":             {value: "2h"},
		"WAKE_MODE":                   {value: "invoke", with: map[string]string{"WAKE_FUNCTION": "processor"}},
		"WAKE_FUNCTION":               {value: "other-processor", with: map[string]string{"WAKE_MODE": "invoke"}},
		"WAKE_BUCKET":                 {value: "control-bucket"},
		"WAKE_DEBOUNCE":               {value: "100ms"},
		"WAKE_SWEEP":                  {value: "10m"},
		"ARCHIVE_BATCH_SIZE":          {value: "50"},
		"ARCHIVE_MAX_BATCH_BYTES":     {value: "1048576"},
		"ARCHIVE_ORPHAN_MIN_AGE":      {value: "3h"},
		"ARCHIVE_SSE":                 {value: "aws:kms"},
		"ARCHIVE_KMS_KEY_ID":          {value: "alias/k", with: map[string]string{"ARCHIVE_SSE": "aws:kms"}},
		"AWS_REGION":                  {value: "eu-west-1"},
		"S3_ENDPOINT":                 {value: "http://127.0.0.1:9000"},
		"S3_PATH_STYLE":               {value: "false"},
		"S3_ACCESS_KEY_ID":            {value: "AKIAEXAMPLE", with: map[string]string{"S3_SECRET_ACCESS_KEY": "secret"}},
		"S3_SECRET_ACCESS_KEY":        {value: "other-secret", with: map[string]string{"S3_ACCESS_KEY_ID": "AKIAEXAMPLE"}},
		"S3_MAX_ATTEMPTS":             {value: "5"},
		"ARCHIVE_BODY_RETENTION_DAYS": {value: "30"},
		"WEBHOOK_QUARANTINE_CAP":      {value: "50"},
	}
}

// local is what the dev stack would have started: placeholders will do,
// nothing is dialled.
func local(t *testing.T) devstack.Local {
	t.Helper()
	sources, err := filepath.Abs(filepath.Join("..", "..", "dev", "sources.json"))
	if err != nil {
		t.Fatal(err)
	}
	return devstack.Local{DatabaseURL: "postgres://postgres@127.0.0.1:1/webhook_inbox", S3Endpoint: "http://127.0.0.1:2", SourcesFile: sources}
}

func configs(t *testing.T, env map[string]string, l devstack.Local) (devstack.Configs, error) {
	t.Helper()
	return devstack.ConfigsFromEnv(func(k string) string { return env[k] }, l)
}

// TestDevStackHonoursEveryLambdaVariable: for every variable the Lambdas'
// configuration reads, a valid value that is not the default changes the
// configuration the dev stack runs: make dev ignores none of them.
func TestDevStackHonoursEveryLambdaVariable(t *testing.T) {
	t.Parallel()
	table := samples(t)
	full := map[string]string{}
	for k, s := range table {
		full[k] = s.value
	}
	vars := lambdaVariables(nil, full)
	if len(vars) < 25 {
		t.Fatalf("only %d variables read: %v", len(vars), vars)
	}
	l := local(t)
	base, err := configs(t, nil, l)
	if err != nil {
		t.Fatalf("the dev stack's defaults: %v", err)
	}
	for _, name := range vars {
		s, ok := table[name]
		if !ok {
			t.Errorf("%s is read by the Lambdas' configuration but has no sample value in this test: add one", name)
			continue
		}
		env := map[string]string{}
		for k, v := range s.with {
			env[k] = v
		}
		// Compared with the same companions alone when they are valid by
		// themselves, so the difference is this variable's.
		before, err := configs(t, env, l)
		if err != nil {
			before = base
		}
		env[name] = s.value
		after, err := configs(t, env, l)
		if err != nil {
			t.Errorf("%s=%q: %v", name, s.value, err)
			continue
		}
		if fingerprint(after) == fingerprint(before) {
			t.Errorf("%s=%q does not change the dev stack's configuration: make dev ignores it", name, s.value)
		}
	}
}

// TestConfigsAreTheLambdas: with every variable set, the dev stack runs
// the configurations the Lambdas read, but for the overrides it documents.
func TestConfigsAreTheLambdas(t *testing.T) {
	t.Parallel()
	env := map[string]string{}
	for k, s := range samples(t) {
		env[k] = s.value
	}
	delete(env, "WEBHOOK_SOURCES") // one document: the file
	getenv := func(k string) string { return env[k] }
	l := local(t)
	l.EMF = true
	c, err := devstack.ConfigsFromEnv(getenv, l)
	if err != nil {
		t.Fatal(err)
	}
	if len(c.StandIns) != 0 || c.LocalDatabase || c.LocalS3 {
		t.Fatalf("stand-ins over set variables: %v", c.StandIns)
	}
	rc, _ := receiver.ConfigFromEnv(getenv)
	pc, _ := processor.ConfigFromEnv(getenv)
	ac, _ := archive.ConfigFromEnv(getenv)
	db, _ := storage.PoolConfigFromEnv(getenv)
	sources, _ := source.Load(getenv)
	s3, _ := blobstore.ConfigFromEnv(getenv)
	waking, _ := wake.ConfigFromEnv(getenv)
	for _, p := range []struct {
		name      string
		dev, want any
	}{
		{"receiver", c.Receiver, rc}, {"processor", c.Processor, pc}, {"archive", c.Archive, ac},
		{"database", c.Database, db}, {"sources", c.Sources, sources}, {"bucket", c.S3, s3}, {"wake-ups", c.Waking, waking},
	} {
		if fingerprint(p.dev) != fingerprint(p.want) {
			t.Errorf("the dev stack's %s differs from the Lambda's", p.name)
		}
	}
}

// TestConfigsForAPerson: without --emf, no EMF and no metrics line per
// run; the flag's archive age wins over ARCHIVE_MIN_AGE, which wins over
// the dev default.
func TestConfigsForAPerson(t *testing.T) {
	t.Parallel()
	l := local(t)
	c, err := configs(t, nil, l)
	if err != nil {
		t.Fatal(err)
	}
	if !c.Receiver.Metrics.Off {
		t.Error("the receiver's EMF is on under make dev")
	}
	if !c.Processor.Metrics.Off {
		t.Error("the processor's EMF is on under make dev")
	}
	if !c.Archive.Metrics.Off {
		t.Error("the archiver's EMF is on under make dev")
	}
	if !field.Check(t, "dev defaults",
		field.Eq("Archive.MinAge", c.Archive.MinAge, time.Minute),
		field.Eq("S3.Bucket", c.S3.Bucket, devstack.Bucket),
		field.Eq("Archive.Prefix", c.Archive.Prefix, devstack.ArchivePrefix),
		field.Eq("S3.Endpoint", c.S3.Endpoint, l.S3Endpoint),
		field.Eq("S3.PathStyle", c.S3.PathStyle, true),
		field.Eq("Database.URL", c.Database.URL, l.DatabaseURL),
		field.Eq("LocalDatabase", c.LocalDatabase, true),
		field.Eq("LocalS3", c.LocalS3, true),
		field.Eq("SourcesFrom", c.SourcesFrom, l.SourcesFile),
		field.Eq("Receiver.SourcesRefresh", c.Receiver.SourcesRefresh, devstack.SourcesRefresh),
	) {
		t.FailNow()
	}
	if c, _ := configs(t, map[string]string{"ARCHIVE_MIN_AGE": "2h"}, l); c.Archive.MinAge != 2*time.Hour {
		t.Errorf("ARCHIVE_MIN_AGE: %s", c.Archive.MinAge)
	}
	l.ArchiveAge = time.Second
	if c, _ := configs(t, map[string]string{"ARCHIVE_MIN_AGE": "2h"}, l); c.Archive.MinAge != time.Second {
		t.Errorf("--archive-age: %s", c.Archive.MinAge)
	}
}

// TestConfigsReportEveryProblemOnce: one bad shared variable is one line,
// with the rest.
func TestConfigsReportEveryProblemOnce(t *testing.T) {
	t.Parallel()
	_, err := configs(t, map[string]string{"DATABASE_QUERY_MODE": "fast", "LOG_LEVEL": "loud", "ARCHIVE_SSE": "none"}, local(t))
	if err == nil {
		t.Fatal("accepted")
	}
	if n := strings.Count(err.Error(), "DATABASE_QUERY_MODE"); n != 1 {
		t.Errorf("DATABASE_QUERY_MODE named %d times:\n%v", n, err)
	}
	for _, want := range []string{"LOG_LEVEL", "ARCHIVE_SSE"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error does not name %s:\n%v", want, err)
		}
	}
}

// TestStackEnv: what an operator command needs, the stand-ins included,
// and a secret's name rather than its value.
func TestStackEnv(t *testing.T) {
	t.Parallel()
	l := local(t)
	raw := map[string]string{"DATABASE_SECRET_ARN": "arn:aws:secretsmanager:eu-west-1:1:secret:db", "WEBHOOK_SOURCES_FILE": "dev/sources.json"}
	resolved := map[string]string{"DATABASE_URL": "postgres://u:hunter2@db/x", "WEBHOOK_SOURCES_FILE": "../../dev/sources.json"}
	c, err := configs(t, resolved, l)
	if err != nil {
		t.Fatal(err)
	}
	env := c.StackEnv(func(k string) string { return raw[k] })
	if !field.Check(t, "stack env",
		field.Eq("DATABASE_URL", env["DATABASE_URL"], ""),
		field.Is("DATABASE_SECRET_ARN", env["DATABASE_SECRET_ARN"], env["DATABASE_SECRET_ARN"] != "", "set"),
		field.Is("WEBHOOK_SOURCES_FILE", env["WEBHOOK_SOURCES_FILE"], filepath.IsAbs(env["WEBHOOK_SOURCES_FILE"]), "an absolute path"),
		field.Eq("S3_ENDPOINT", env["S3_ENDPOINT"], l.S3Endpoint),
		field.Is("S3_ACCESS_KEY_ID", env["S3_ACCESS_KEY_ID"], env["S3_ACCESS_KEY_ID"] != "", "set"),
		field.Eq("ARCHIVE_BUCKET", env["ARCHIVE_BUCKET"], devstack.Bucket),
		field.Is("AWS_REGION", env["AWS_REGION"], env["AWS_REGION"] != "", "set"),
		field.Is("ARCHIVE_MIN_AGE", env["ARCHIVE_MIN_AGE"], env["ARCHIVE_MIN_AGE"] != "", "set"),
	) {
		t.FailNow()
	}
}

// fingerprint renders v, pointers followed and functions by type only, so
// that two configurations read from the same environment render the same
// and any setting that differs shows.
func fingerprint(v any) string {
	var b strings.Builder
	walk(&b, reflect.ValueOf(v), map[uintptr]bool{}, 0)
	return b.String()
}

func walk(b *strings.Builder, v reflect.Value, seen map[uintptr]bool, depth int) {
	if depth > 50 {
		b.WriteString("…")
		return
	}
	switch v.Kind() {
	case reflect.Invalid:
		b.WriteString("<nil>")
	case reflect.Pointer:
		if v.IsNil() {
			b.WriteString("nil")
			return
		}
		if seen[v.Pointer()] {
			b.WriteString("<cycle>")
			return
		}
		seen[v.Pointer()] = true
		b.WriteString("&")
		walk(b, v.Elem(), seen, depth+1)
		delete(seen, v.Pointer())
	case reflect.Interface:
		if v.IsNil() {
			b.WriteString("nil")
			return
		}
		walk(b, v.Elem(), seen, depth+1)
	case reflect.Struct:
		b.WriteString(v.Type().String() + "{")
		for i := range v.NumField() {
			b.WriteString(v.Type().Field(i).Name + ":")
			walk(b, v.Field(i), seen, depth+1)
			b.WriteString(" ")
		}
		b.WriteString("}")
	case reflect.Map:
		keys := v.MapKeys()
		texts := make([]string, len(keys))
		for i, k := range keys {
			var kb, vb strings.Builder
			walk(&kb, k, seen, depth+1)
			walk(&vb, v.MapIndex(k), seen, depth+1)
			texts[i] = kb.String() + "=" + vb.String()
		}
		sort.Strings(texts)
		b.WriteString("map[" + strings.Join(texts, " ") + "]")
	case reflect.Slice, reflect.Array:
		b.WriteString("[")
		for i := range v.Len() {
			walk(b, v.Index(i), seen, depth+1)
			b.WriteString(" ")
		}
		b.WriteString("]")
	case reflect.Func, reflect.Chan, reflect.UnsafePointer:
		fmt.Fprintf(b, "%s(nil=%v)", v.Type(), v.IsNil())
	case reflect.String:
		b.WriteString(fmt.Sprintf("%q", v.String()))
	case reflect.Bool:
		fmt.Fprint(b, v.Bool())
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		fmt.Fprint(b, v.Int())
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
		fmt.Fprint(b, v.Uint())
	case reflect.Float32, reflect.Float64:
		fmt.Fprint(b, v.Float())
	default:
		fmt.Fprintf(b, "<%s>", v.Kind())
	}
}

// TestEveryFunctionRefusesWeakTLS: the Lambdas and the migration function
// read the database's TLS floor through storage.PoolConfigFromEnv, so a
// URL asking for less than DATABASE_SSLMODE (default verify-full) stops
// each of them at start-up, naming the setting that would accept it, and
// that setting does.
func TestEveryFunctionRefusesWeakTLS(t *testing.T) {
	t.Parallel()
	env := map[string]string{
		"DATABASE_URL":    "postgres://app:hunter2@db.example.internal:5432/inbox?sslmode=require",
		"WEBHOOK_SOURCES": `{"sources":{"inline":{"kind":"stripe","secrets":["whsec_x_0123456789abcdefghijkl"]}}}`,
		"ARCHIVE_BUCKET":  "b",
		// The migration function's own.
		"MIGRATOR_ROLES_AUTH": "password",
	}
	getenv := func(k string) string { return env[k] }
	// The four functions that connect, and the migration function in its
	// direct mode, start with lambdadb.Connect, which reads the pool with
	// storage.PoolConfigFromEnv; the apply mode reads it with that too.
	configs := []func(func(string) string) error{
		func(g func(string) string) error { _, err := storage.PoolConfigFromEnv(g); return err },
		func(g func(string) string) error {
			// lambdadb.Connect as functions/migrator's direct mode calls it:
			// the same Connect the other four functions start with.
			c, err := lambdadb.Connect(t.Context(), g, migrator.ConfigFromEnv, migrator.Config.Pool)
			if err == nil {
				c.Pool.Close() // a pool connects on first use: nothing was dialled
			}
			return err
		},
	}
	for i, config := range configs {
		err := config(getenv)
		if err == nil || !strings.Contains(err.Error(), "sslmode=require") || !strings.Contains(err.Error(), "set DATABASE_SSLMODE=require") {
			t.Errorf("configuration %d: %v, want sslmode=require refused", i, err)
		}
	}
	env["DATABASE_SSLMODE"] = "require"
	for i, config := range configs {
		if err := config(getenv); err != nil {
			t.Errorf("configuration %d with DATABASE_SSLMODE=require: %v", i, err)
		}
	}
}
