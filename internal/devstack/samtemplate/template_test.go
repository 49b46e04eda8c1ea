package samtemplate_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/webhook-inbox/webhook-inbox/internal/devstack/locals3"
	"github.com/webhook-inbox/webhook-inbox/internal/devstack/samtemplate"
	"github.com/webhook-inbox/webhook-inbox/internal/testkit/s3test"
	"github.com/webhook-inbox/webhook-inbox/shared/archive"
	"github.com/webhook-inbox/webhook-inbox/shared/blobstore"
	"github.com/webhook-inbox/webhook-inbox/shared/migrator"
	"github.com/webhook-inbox/webhook-inbox/shared/operations"
	"github.com/webhook-inbox/webhook-inbox/shared/processor"
	"github.com/webhook-inbox/webhook-inbox/shared/receiver"
	"github.com/webhook-inbox/webhook-inbox/shared/relay"
	"github.com/webhook-inbox/webhook-inbox/shared/secrets"
	"github.com/webhook-inbox/webhook-inbox/shared/settings"
	"github.com/webhook-inbox/webhook-inbox/shared/source"
	"github.com/webhook-inbox/webhook-inbox/shared/storage"
	"github.com/webhook-inbox/webhook-inbox/shared/wake"
)

const sourcesSecret = "arn:aws:secretsmanager:us-east-1:123456789012:secret:inbox-sources-GhIjKl"

var repoRoot = filepath.Join("..", "..", "..")

// load parses the repository's template with the required parameter and
// the others given, as the SAM template (before SAM's translation).
func load(t *testing.T, params map[string]any) (*samtemplate.Template, map[string]any) {
	t.Helper()
	all := map[string]any{"SourcesSecretArn": sourcesSecret}
	for k, v := range params {
		all[k] = v
	}
	tpl, err := samtemplate.Open(filepath.Join(repoRoot, "template.yaml"), all)
	if err != nil {
		t.Fatal(err)
	}
	return tpl, evaluatedJSON(t, tpl)["Resources"].(map[string]any)
}

// evaluatedJSON is the evaluated template as plain JSON values
// ({"Resources": {id: {"Type", "Properties", "DependsOn"}}, "Outputs": {id:
// {"Value"}}}), for checks that walk every resource.
func evaluatedJSON(t *testing.T, tpl *samtemplate.Template) map[string]any {
	t.Helper()
	res, err := tpl.Stack.Resources()
	if err != nil {
		t.Fatal(err)
	}
	outs, err := tpl.Stack.Outputs()
	if err != nil {
		t.Fatal(err)
	}
	resources, outputs := map[string]any{}, map[string]any{}
	for id, r := range res {
		entry := map[string]any{"Type": r.Type, "Properties": r.Properties}
		if len(r.DependsOn) > 0 {
			entry["DependsOn"] = r.DependsOn
		}
		resources[id] = entry
	}
	for id, v := range outs {
		outputs[id] = map[string]any{"Value": v}
	}
	var m map[string]any
	if err := json.Unmarshal([]byte(mustJSON(map[string]any{"Resources": resources, "Outputs": outputs})), &m); err != nil {
		t.Fatal(err)
	}
	return m
}

func props(t *testing.T, resources map[string]any, id string) map[string]any {
	t.Helper()
	r, ok := resources[id].(map[string]any)
	if !ok {
		t.Fatalf("no resource %s", id)
	}
	p, _ := r["Properties"].(map[string]any)
	return p
}

var functionIDs = []string{"ArchiverFunction", "MigrationFrontFunction", "MigrationFunction", "OperatorFunction", "OperatorReadFunction",
	"ProcessorFunction", "ReceiverFunction", "RelayFunction"}

// binaries are the packages the functions' Makefile targets build: the
// operator function and the migration function are each one binary
// deployed twice.
var binaries = map[string]string{
	"ArchiverFunction":       "./functions/archiver",
	"MigrationFrontFunction": "./functions/migrator",
	"MigrationFunction":      "./functions/migrator",
	"OperatorFunction":       "./functions/operator",
	"OperatorReadFunction":   "./functions/operator",
	"ProcessorFunction":      "./functions/processor",
	"ReceiverFunction":       "./functions/receiver",
	"RelayFunction":          "./functions/relay",
}

// samEvents are the SAM events of each function, by type: the receiver's four
// routes (POST and GET, each untokened and tokened) and the relay's two EventBridge rules; no function has a
// Schedule or ScheduleV2 event (nothing polls at idle), and the others are
// invoked by who wakes them (TestNoProfilePollsAtIdle).
var samEvents = map[string][]string{
	"ReceiverFunction": {"HttpApi", "HttpApi", "HttpApi", "HttpApi"},
	"RelayFunction":    {"EventBridgeRule", "EventBridgeRule"},
}

// TestFunctionsBuildAndRun checks what `sam build` and the runtime need
// for the eight functions: the Makefile target SAM's makefile build method
// calls, building the function's package, the bootstrap handler, arm64
// and provided.al2023, the database variables sam local may override, the
// routes and the events; then, in every profile and mode, that each
// function's own configuration code accepts the environment the template
// gives it once deployed (acceptsItsEnvironment).
func TestFunctionsBuildAndRun(t *testing.T) {
	t.Parallel()
	tpl, _ := load(t, nil)
	makefile, err := os.ReadFile(filepath.Join(repoRoot, "Makefile"))
	if err != nil {
		t.Fatal(err)
	}
	if got := tpl.FunctionIDs(); strings.Join(got, ",") != strings.Join(functionIDs, ",") {
		t.Fatalf("functions = %v, want %v", got, functionIDs)
	}
	res, err := tpl.Stack.Resources()
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range functionIDs {
		f := tpl.Functions[id]
		if f.BuildMethod != "makefile" || f.Handler != "bootstrap" || f.Runtime != "provided.al2023" ||
			len(f.Architectures) != 1 || f.Architectures[0] != "arm64" || f.CodeURI != "." {
			t.Errorf("%s: %+v", id, f)
		}
		target := regexp.MustCompile(`(?m)^build-` + id + `:.*\n\t.* -o \$\(ARTIFACTS_DIR\)/bootstrap (\S+)$`).FindSubmatch(makefile)
		if target == nil || string(target[1]) != binaries[id] {
			t.Errorf("the Makefile's build-%s target builds %q, want %s", id, target, binaries[id])
		}
		if f.Timeout <= 0 || f.Timeout > 15*time.Minute {
			t.Errorf("%s: timeout %v", id, f.Timeout)
		}
		// sam local overrides only declared variables: the database's are
		// declared for every function that connects, and the secret's for
		// those that read one.
		want := []string{"DATABASE_URL", "DATABASE_HOST", "DATABASE_PORT", "DATABASE_NAME", "DATABASE_IAM_AUTH", "DATABASE_SSLMODE"}
		if _, ok := roleSecrets[id]; ok || id == "MigrationFrontFunction" {
			want = append(want, "DATABASE_SECRET_ARN")
		}
		for _, k := range want {
			if _, ok := f.Environment[k]; !ok {
				t.Errorf("%s does not declare %s", id, k)
			}
		}
		for k, v := range f.Environment {
			if strings.Contains(v, "${") {
				t.Errorf("%s: %s=%q is not resolved", id, k, v)
			}
		}
		var types []string
		evs, _ := res[id].Properties["Events"].(map[string]any)
		for _, ev := range evs {
			types = append(types, fmt.Sprint(ev.(map[string]any)["Type"]))
		}
		slices.Sort(types)
		if !slices.Equal(types, samEvents[id]) || len(f.Schedules) > 0 {
			t.Errorf("%s's events %v (schedules %+v), want %v", id, types, f.Schedules, samEvents[id])
		}
	}
	rcv := tpl.Functions["ReceiverFunction"]
	// Sorted by event name: the tokened route and its GET (senders'
	// handshakes), then the untokened one and its GET.
	wantRoutes := [][2]string{{"POST", "/webhooks/{source}/{token}"}, {"GET", "/webhooks/{source}/{token}"}, {"POST", "/webhooks/{source}"}, {"GET", "/webhooks/{source}"}}
	if len(rcv.Routes) != len(wantRoutes) {
		t.Errorf("receiver routes = %+v", rcv.Routes)
	}
	for i, rt := range rcv.Routes {
		if i >= len(wantRoutes) || rt.Method != wantRoutes[i][0] || rt.Path != wantRoutes[i][1] || rt.Payload != "2.0" {
			t.Errorf("receiver route %d = %+v, want %v", i, rt, wantRoutes)
		}
	}
	if rcv.Environment["WEBHOOK_MAX_BODY_BYTES"] != "1048576" {
		t.Errorf("WEBHOOK_MAX_BODY_BYTES = %q", rcv.Environment["WEBHOOK_MAX_BODY_BYTES"])
	}
	// The operator function, twice: reached through its function URL only
	// (checked on the translated template), its timeout that of a page
	// (read) or of an action bounded per call (act).
	for id, timeout := range map[string]time.Duration{"OperatorReadFunction": 2 * time.Minute, "OperatorFunction": 5 * time.Minute} {
		f := tpl.Functions[id]
		if f.Timeout != timeout || f.MemorySize != 512 {
			t.Errorf("%s: timeout %v, memory %d MB; want %v and 512", id, f.Timeout, f.MemorySize, timeout)
		}
		if f.URL == nil || f.URL.AuthType != "AWS_IAM" {
			t.Errorf("%s: function URL %+v, want one with AWS_IAM auth", id, f.URL)
		}
	}
	for _, id := range functionIDs {
		if f := tpl.Functions[id]; f.URL != nil && id != "OperatorFunction" && id != "OperatorReadFunction" {
			t.Errorf("%s has a function URL %+v", id, f.URL)
		}
	}
	// Migrations may rewrite a large table; Lambda stops at 15 minutes, and
	// the front, which waits for the migration function's answer, must
	// outlast it.
	mig, front := tpl.Functions["MigrationFunction"], tpl.Functions["MigrationFrontFunction"]
	if mig.Timeout < 10*time.Minute || mig.Timeout >= front.Timeout {
		t.Errorf("migration timeout %v, its front's %v", mig.Timeout, front.Timeout)
	}

	// What the receiver reads at start-up from the control bucket (the
	// relay's copy of the sources secret), served by a local S3 under the
	// name the bucket gets once deployed, in place of S3 behind the
	// gateway endpoint.
	sources, err := os.ReadFile(filepath.Join(repoRoot, "dev", "sources.json"))
	if err != nil {
		t.Fatal(err)
	}
	srv := s3test.Server(t)
	bucket := s3test.Config(srv, standIns{}.bucketName("ControlBucket"))
	store := s3test.Open(t, bucket)
	if err := locals3.CreateBucket(t.Context(), bucket, false); err != nil {
		t.Fatal(err)
	}
	if _, err := store.Put(t.Context(), relay.DefaultSourcesKey, sources, "application/json"); err != nil {
		t.Fatal(err)
	}
	s3Env := map[string]string{blobstore.EnvEndpoint: bucket.Endpoint, blobstore.EnvAccessKeyID: bucket.AccessKeyID, blobstore.EnvSecretAccessKey: bucket.SecretAccessKey}
	for _, sc := range scenarios {
		t.Run(sc.name, func(t *testing.T) {
			t.Parallel()
			params := map[string]any{}
			for k, v := range sc.params {
				params[k] = v
			}
			tpl, _ := load(t, params)
			acceptsItsEnvironment(t, sc, tpl, s3Env)
		})
	}
}

// acceptsItsEnvironment: each function's own start-up code accepts the
// environment the template gives it once deployed, and reads from it what
// the scenario says: the functions that connect resolve their database
// (secrets.Environment, with the stack's secrets standing in for Secrets
// Manager) to the profile's endpoint, as their own role or, for the
// migration function, as the admin whose secret its front hands it, and
// then read their configuration; the wakers wake the processor as the
// profile says; the relay knows what to arm and copy; the front invokes
// this deploy's migration function.
func acceptsItsEnvironment(t *testing.T, sc scenario, tpl *samtemplate.Template, s3Env map[string]string) {
	t.Helper()
	ctx := t.Context()
	sm := newSecretsOf(t, tpl)
	res, err := tpl.Stack.Resources()
	if err != nil {
		t.Fatal(err)
	}
	s := standIns{res: res}
	direct := "db.example.internal"
	switch {
	case sc.instance():
		direct = s.host("PostgresInstance")
	case sc.cluster():
		direct = s.host("DatabaseCluster")
	}
	functions := direct
	if sc.proxy() {
		functions, _ = s.getAtt("DatabaseProxy", "Endpoint")
	}
	control, processorName := s.bucketName("ControlBucket"), s.functionName("ProcessorFunction")
	wakeMode := wake.Mode(sc.wakeMode())
	// connects checks a function's resolved database URL.
	connects := func(id, url, host, user string) {
		t.Helper()
		want := "postgres://" + user + "@" + host + ":5432/webhook_inbox?sslmode=verify-full"
		if url != want {
			t.Errorf("%s connects to %s, want %s", id, url, want)
		}
	}
	for _, id := range functionIDs {
		over := map[string]string{}
		if id == "ReceiverFunction" || id == "OperatorFunction" {
			// Both read the relay's copy of the sources at start-up (the
			// operator's re-ingest verifies with it).
			over = s3Env
		}
		if id == "MigrationFunction" {
			// The apply mode reads the admin secret the front names in its
			// payload (migrator.Applier).
			admin, err := s.resolve(envOf(res["MigrationFrontFunction"])["DATABASE_SECRET_ARN"])
			if err != nil {
				t.Fatal(err)
			}
			over = map[string]string{"DATABASE_SECRET_ARN": admin}
		}
		getenv := deployedEnv(t, tpl, id, over)
		if _, err := settings.LoggerFromEnv(getenv); err != nil {
			t.Errorf("%s: %v", id, err)
		}
		switch id {
		case "RelayFunction":
			c, err := relay.ConfigFromEnv(getenv)
			if err != nil {
				t.Errorf("the relay refuses its environment: %v", err)
				continue
			}
			if c.ControlBucket != control || c.SourcesSecretARN != sourcesSecret || c.SourcesKey != relay.DefaultSourcesKey || c.ScheduleGroup != "webhook-inbox-wake" ||
				c.Targets[relay.TargetProcessor] != processorARN || c.Targets[relay.TargetArchiver] != archiverARN ||
				!strings.HasPrefix(c.SchedulerRoleARN, "arn:aws:iam::") {
				t.Errorf("the relay's configuration %+v", c)
			}
			continue
		case "MigrationFrontFunction":
			mode, modeErr := migrator.ModeFromEnv(getenv)
			c, err := migrator.FrontConfigFromEnv(getenv)
			if err := errors.Join(modeErr, err); err != nil || mode != migrator.ModeFront {
				t.Errorf("the front refuses its environment (mode %q): %v", mode, err)
				continue
			}
			admin := adminSecret
			switch {
			case sc.instance():
				admin = s.masterSecretArn("PostgresInstance")
			case sc.cluster():
				admin = s.masterSecretArn("DatabaseCluster")
			}
			if c.Function != s.functionArn("MigrationFunction")+":1" || c.DatabaseSecretARN != admin {
				t.Errorf("the front invokes %s with %s, want this deploy's version of the migration function with %s", c.Function, c.DatabaseSecretARN, admin)
			}
			continue
		}
		resolved, _, err := secrets.EnvironmentFrom(ctx, getenv, sm)
		if err != nil {
			t.Errorf("%s cannot resolve its database: %v", id, err)
			continue
		}
		switch id {
		case "MigrationFunction":
			mode, modeErr := migrator.ModeFromEnv(getenv)
			// What the apply mode reads: its settings and its pool.
			_, err := migrator.ConfigFromEnv(resolved)
			db, dbErr := storage.PoolConfigFromEnv(resolved)
			if err := errors.Join(modeErr, err, dbErr); err != nil || mode != migrator.ModeApply {
				t.Errorf("the migration function refuses its environment (mode %q): %v", mode, err)
				continue
			}
			// Straight to the database, never through the proxy.
			connects(id, db.URL, direct, "webhook_admin")
		case "ReceiverFunction":
			// What functions/receiver reads: its settings, its pool, its
			// sources and its wake-ups.
			_, err := receiver.ConfigFromEnv(resolved)
			db, dbErr := storage.PoolConfigFromEnv(resolved)
			sources, sourcesErr := source.Load(resolved)
			waking, wakeErr := wake.ConfigFromEnv(resolved)
			if err := errors.Join(err, dbErr, sourcesErr, wakeErr); err != nil {
				t.Errorf("the receiver refuses its environment: %v", err)
				continue
			}
			connects(id, db.URL, functions, dbRoles[id])
			if sources == nil || len(sources.Names()) == 0 {
				t.Error("the receiver read no sources from the control bucket's copy")
			}
			if waking.Mode != wakeMode || waking.Function != processorName || waking.Bucket != control {
				t.Errorf("the receiver wakes %+v, want %s of %s, markers in %s", waking, wakeMode, processorName, control)
			}
		case "ProcessorFunction":
			// As functions/processor reads it: its settings, and what it
			// runs on with its own packages' readers.
			_, err := processor.ConfigFromEnv(resolved)
			db, dbErr := storage.PoolConfigFromEnv(resolved)
			waking, wakeErr := wake.ConfigFromEnv(resolved)
			bodies, s3Err := blobstore.ConfigFromEnv(resolved)
			if err := errors.Join(err, dbErr, wakeErr, s3Err); err != nil {
				t.Errorf("the processor refuses its environment: %v", err)
				continue
			}
			connects(id, db.URL, functions, dbRoles[id])
			if waking.Mode != wake.ModeNone || waking.Bucket != control || bodies.Bucket != s.bucketName("ArchiveBucket") {
				t.Errorf("the processor wakes %+v, reads the archive %q", waking, bodies.Bucket)
			}
		case "ArchiverFunction":
			// What functions/archiver reads: its settings, its pool, its
			// bucket and its wake-ups.
			_, err := archive.ConfigFromEnv(resolved)
			db, dbErr := storage.PoolConfigFromEnv(resolved)
			s3, s3Err := blobstore.ConfigFromEnv(resolved)
			waking, wakeErr := wake.ConfigFromEnv(resolved)
			if err := errors.Join(err, dbErr, s3Err, wakeErr); err != nil {
				t.Errorf("the archiver refuses its environment: %v", err)
				continue
			}
			connects(id, db.URL, functions, dbRoles[id])
			if waking.Mode != wake.ModeNone || waking.Bucket != control || s3.Bucket != s.bucketName("ArchiveBucket") {
				t.Errorf("the archiver arms %+v, archives to %q", waking, s3.Bucket)
			}
		case "OperatorFunction", "OperatorReadFunction":
			// What functions/operator reads: its settings, its pool and
			// its wake-ups.
			_, err := operations.ConfigFromEnv(resolved)
			db, dbErr := storage.PoolConfigFromEnv(resolved)
			waking, wakeErr := wake.ConfigFromEnv(resolved)
			if err := errors.Join(err, dbErr, wakeErr); err != nil {
				t.Errorf("%s refuses its environment: %v", id, err)
				continue
			}
			connects(id, db.URL, functions, dbRoles[id])
			want := wake.ModeNone
			if id == "OperatorFunction" {
				want = wakeMode
			}
			if waking.Mode != want || (want == wake.ModeInvoke && waking.Function != processorName) {
				t.Errorf("%s wakes %+v, want %s", id, waking, want)
			}
		default:
			t.Errorf("%s: no check of its environment", id)
		}
	}
}

// TestWokenProcessorSettings: in every profile, the processor the
// wake-ups start reads the template's environment as it is deployed: each
// invocation drains, then lingers PROCESSOR_RUN_FOR (1 s) polling, longer
// than every waker's debounce (WAKE_DEBOUNCE) so that a receipt the
// receiver did not wake it for is still found, and short, so that nothing
// runs on while nothing arrives; its run and the safety margin after it
// fit in its timeout; it wakes nothing at once but arms its later work in
// the control bucket, knows the archive (replays) and the archive's age;
// and a wake-up that waited in Lambda's queue for more than 15 minutes is
// dropped, after two retries.
func TestWokenProcessorSettings(t *testing.T) {
	t.Parallel()
	for _, p := range profiles {
		tpl, res := load(t, map[string]any{"Profile": p})
		fn := tpl.Functions["ProcessorFunction"]
		db := map[string]string{"DATABASE_URL": "postgres://template-test@127.0.0.1:1/x"} // the secret's, in AWS
		env := deployedEnv(t, tpl, "ProcessorFunction", db)
		c, err := processor.ConfigFromEnv(env)
		if err != nil {
			t.Fatalf("%s: the processor refuses the template's environment: %v", p, err)
		}
		waking, err := wake.ConfigFromEnv(env)
		if err != nil {
			t.Fatalf("%s: the processor's wake-ups: %v", p, err)
		}
		bodies, err := blobstore.ConfigFromEnv(env)
		if err != nil {
			t.Fatalf("%s: the processor's archive: %v", p, err)
		}
		for id := range wakers {
			w, err := wake.ConfigFromEnv(deployedEnv(t, tpl, id, nil))
			if err != nil {
				t.Fatalf("%s: %s's wake-ups: %v", p, id, err)
			}
			if c.RunFor <= w.Debounce {
				t.Errorf("%s: the processor lingers %v, %s debounces %v: a debounced receipt waits for the sweep", p, c.RunFor, id, w.Debounce)
			}
		}
		if c.RunFor <= waking.Debounce || c.RunFor > 5*time.Second || c.PollInterval >= c.RunFor {
			t.Errorf("%s: each wake-up runs %v polling every %v (debounce %v)", p, c.RunFor, c.PollInterval, waking.Debounce)
		}
		if fn.Timeout <= c.RunFor+c.SafetyMargin {
			t.Errorf("%s: timeout %s leaves no room for the run (%s) and its safety margin (%s)", p, fn.Timeout, c.RunFor, c.SafetyMargin)
		}
		if waking.Mode != wake.ModeNone || waking.Bucket != (standIns{}).bucketName("ControlBucket") || c.ArchiveAfter != 7*24*time.Hour ||
			bodies.Bucket != (standIns{}).bucketName("ArchiveBucket") {
			t.Errorf("%s: waking %+v, archive after %v, archive %q", p, waking, c.ArchiveAfter, bodies.Bucket)
		}
		if eic := mustJSON(props(t, res, "ProcessorFunction")["EventInvokeConfig"]); eic != `{"MaximumEventAgeInSeconds":900,"MaximumRetryAttempts":2}` {
			t.Errorf("%s: the processor's EventInvokeConfig %s", p, eic)
		}
		if len(fn.Schedules)+len(fn.Routes) != 0 {
			t.Errorf("%s: the processor runs on %+v %+v: it runs only when woken", p, fn.Schedules, fn.Routes)
		}
	}
}

// TestFunctionURLConfig: a function's FunctionUrlConfig is read, with
// Globals applied and InvokeMode defaulting to BUFFERED as Lambda's does;
// a function without one has no URL; a config without AuthType, or with
// an AuthType or InvokeMode Lambda does not know, is refused.
func TestFunctionURLConfig(t *testing.T) {
	t.Parallel()
	const withGlobals = `
Globals:
  Function:
    FunctionUrlConfig: {AuthType: AWS_IAM}
Resources:
  Inherits:
    Type: AWS::Serverless::Function
    Properties: {Handler: bootstrap}
  Streaming:
    Type: AWS::Serverless::Function
    Properties: {Handler: bootstrap, FunctionUrlConfig: {AuthType: NONE, InvokeMode: RESPONSE_STREAM}}
`
	const plain = `
Resources:
  Signed:
    Type: AWS::Serverless::Function
    Properties: {Handler: bootstrap, FunctionUrlConfig: {AuthType: AWS_IAM, InvokeMode: BUFFERED}}
  Plain:
    Type: AWS::Serverless::Function
    Properties: {Handler: bootstrap}
`
	open := func(doc string) (*samtemplate.Template, error) {
		path := filepath.Join(t.TempDir(), "template.yaml")
		if err := os.WriteFile(path, []byte(doc), 0o644); err != nil {
			t.Fatal(err)
		}
		return samtemplate.Open(path, nil)
	}
	tpl, err := open(withGlobals)
	if err != nil {
		t.Fatal(err)
	}
	for id, want := range map[string]samtemplate.FunctionURL{
		"Inherits":  {AuthType: "AWS_IAM", InvokeMode: "BUFFERED"},
		"Streaming": {AuthType: "NONE", InvokeMode: "RESPONSE_STREAM"},
	} {
		if u := tpl.Functions[id].URL; u == nil || *u != want {
			t.Errorf("%s: %+v, want %+v", id, u, want)
		}
	}
	if tpl, err = open(plain); err != nil {
		t.Fatal(err)
	}
	if u := tpl.Functions["Signed"].URL; u == nil || *u != (samtemplate.FunctionURL{AuthType: "AWS_IAM", InvokeMode: "BUFFERED"}) {
		t.Errorf("Signed: %+v", u)
	}
	if u := tpl.Functions["Plain"].URL; u != nil {
		t.Errorf("Plain: %+v, want no URL", u)
	}
	for name, doc := range map[string]string{
		"no AuthType":           strings.Replace(plain, "AuthType: AWS_IAM, ", "", 1),
		"an unknown AuthType":   strings.Replace(plain, "AuthType: AWS_IAM", "AuthType: COGNITO", 1),
		"an unknown InvokeMode": strings.Replace(plain, "InvokeMode: BUFFERED", "InvokeMode: STREAMING", 1),
		"not a map":             strings.Replace(plain, "{AuthType: AWS_IAM, InvokeMode: BUFFERED}", "AWS_IAM", 1),
	} {
		if _, err := open(doc); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}

// TestOperatorFunctionsReadTheirEnvironment: the operator function
// accepts each deployment's environment, as it reads it once deployed, in
// every profile, with the access the deployment says and the archive's
// settings the archiver has; the acting one wakes the processor after a
// requeue or replay as the receiver does (its WAKE_* variables), the
// read-only one wakes nothing.
func TestOperatorFunctionsReadTheirEnvironment(t *testing.T) {
	t.Parallel()
	for _, p := range profiles {
		tpl, _ := load(t, map[string]any{"Profile": p, "ArchiveMinAge": "48h", "ArchiveBatchSize": 250})
		arch := tpl.Functions["ArchiverFunction"].Environment
		rcv := deployedEnv(t, tpl, "ReceiverFunction", nil)
		db := map[string]string{"DATABASE_URL": "postgres://template-test@127.0.0.1:1/x"} // the secret's, in AWS
		for id, access := range map[string]operations.Access{"OperatorReadFunction": operations.AccessRead, "OperatorFunction": operations.AccessAct} {
			getenv := deployedEnv(t, tpl, id, db)
			c, err := operations.ConfigFromEnv(getenv)
			waking, wakeErr := wake.ConfigFromEnv(getenv)
			if err := errors.Join(err, wakeErr); err != nil {
				t.Fatalf("%s, %s refuses the template's environment: %v", p, id, err)
			}
			if c.Access != access || c.Archive == nil || c.Archive.Prefix != "archive" || c.Archive.MinAge != 48*time.Hour || c.Archive.BatchSize != 250 {
				t.Errorf("%s, %s: access %q, archive %+v", p, id, c.Access, c.Archive)
			}
			for _, k := range []string{"ARCHIVE_PREFIX", "ARCHIVE_MIN_AGE", "ARCHIVE_BATCH_SIZE", "S3_ENDPOINT", "S3_ACCESS_KEY_ID", "S3_SECRET_ACCESS_KEY"} {
				if v, ok := tpl.Functions[id].Environment[k]; !ok || v != arch[k] {
					t.Errorf("%s, %s: %s=%q, the archiver's %q", p, id, k, v, arch[k])
				}
			}
			switch access {
			case operations.AccessAct:
				for _, k := range []string{wake.EnvMode, wake.EnvFunction, wake.EnvBucket, wake.EnvDebounce, "WAKE_ENDPOINT"} {
					if getenv(k) != rcv(k) {
						t.Errorf("%s, %s: %s=%q, the receiver's %q", p, id, k, getenv(k), rcv(k))
					}
				}
				want := wake.ModeInvoke
				if p == economy {
					want = wake.ModeObject
				}
				if waking.Mode != want || waking.Function != (standIns{}).functionName("ProcessorFunction") || waking.Bucket != (standIns{}).bucketName("ControlBucket") {
					t.Errorf("%s, %s wakes %+v, want %s", p, id, waking, want)
				}
			default:
				if waking.Mode != wake.ModeNone {
					t.Errorf("%s, %s wakes %+v", p, id, waking)
				}
			}
		}
	}
}

// TestOpenParameters: values are checked as CloudFormation checks them,
// and change what the functions get.
func TestOpenParameters(t *testing.T) {
	t.Parallel()
	tpl, _ := load(t, map[string]any{"DatabaseMode": "existing", "DatabaseHost": "db.internal", "DatabasePort": 6432, "DatabaseAuth": "iam"})
	env := tpl.Functions["ProcessorFunction"].Environment
	if env["DATABASE_HOST"] != "db.internal" || env["DATABASE_PORT"] != "6432" || env["DATABASE_IAM_AUTH"] != "true" || env["DATABASE_USER"] != "webhook_processor" {
		t.Errorf("processor environment = %v", env)
	}
	for name, params := range map[string]map[string]any{
		"not allowed":      {"DatabaseMode": "maybe"},
		"bad pattern":      {"SubnetIds": "subnet-0a,net-1"},
		"below min":        {"ReceiverReservedConcurrency": -1},
		"not a number":     {"DatabasePort": "fivefour"},
		"bad secret arn":   {"DatabaseAdminSecretArn": "my-secret"},
		"bad resource id":  {"DatabaseResourceId": "db/abc"},
		"bad engine major": {"DatabaseEngineVersion": "14.9"},
	} {
		all := map[string]any{"SourcesSecretArn": sourcesSecret}
		for k, v := range params {
			all[k] = v
		}
		if _, err := samtemplate.Open(filepath.Join(repoRoot, "template.yaml"), all); err == nil {
			t.Errorf("%s: %v accepted", name, params)
		}
	}
}

func TestArchiveBucketIsLockedDown(t *testing.T) {
	t.Parallel()
	_, res := load(t, nil)
	b := props(t, res, "ArchiveBucket")
	enc, _ := b["BucketEncryption"].(map[string]any)
	if enc == nil || len(enc["ServerSideEncryptionConfiguration"].([]any)) == 0 {
		t.Error("the bucket has no default encryption")
	}
	pab, _ := b["PublicAccessBlockConfiguration"].(map[string]any)
	for _, k := range []string{"BlockPublicAcls", "BlockPublicPolicy", "IgnorePublicAcls", "RestrictPublicBuckets"} {
		if pab[k] != true {
			t.Errorf("public access block %s = %v", k, pab[k])
		}
	}
	lc, _ := b["LifecycleConfiguration"].(map[string]any)
	if lc == nil || !strings.Contains(mustJSON(lc), "TransitionInDays") {
		t.Error("no lifecycle transition to a colder class")
	}
	pol := mustJSON(props(t, res, "ArchiveBucketPolicy"))
	if !strings.Contains(pol, `"aws:SecureTransport":"false"`) || !strings.Contains(pol, `"Effect":"Deny"`) {
		t.Errorf("no TLS-only bucket policy: %s", pol)
	}
}

// TestArchiveKeepsASafetyNet: archived bodies exist only in the bucket, so
// it keeps versions: what a bad write or delete replaced stays a
// noncurrent version for ArchiveNoncurrentVersionDays (default 7), then
// expires. The archiver may delete only current objects under archive/
// (the orphan sweep: a delete marker in a versioned bucket) and is denied
// deleting versions or changing versioning, the lifecycle or the bucket
// policy.
func TestArchiveKeepsASafetyNet(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		params map[string]any
		days   float64
	}{{nil, 7}, {map[string]any{"ArchiveNoncurrentVersionDays": 2}, 2}} {
		_, res := load(t, c.params)
		b := props(t, res, "ArchiveBucket")
		if v, _ := b["VersioningConfiguration"].(map[string]any); v["Status"] != "Enabled" {
			t.Errorf("versioning = %v, want Enabled", b["VersioningConfiguration"])
		}
		var expiry map[string]any
		var markers bool
		for _, r := range b["LifecycleConfiguration"].(map[string]any)["Rules"].([]any) {
			rule := r.(map[string]any)
			if e, ok := rule["NoncurrentVersionExpiration"].(map[string]any); ok && rule["Status"] == "Enabled" {
				expiry, markers = e, rule["ExpiredObjectDeleteMarker"] == true
			}
		}
		if days := fmt.Sprint(expiry["NoncurrentDays"]); days != fmt.Sprint(c.days) || !markers {
			t.Errorf("%v: noncurrent versions expire by %v (delete markers cleaned: %v), want after %v days", c.params, expiry, markers, c.days)
		}
	}
	_, res := load(t, nil)
	role := props(t, res, "ArchiverRole")
	var allowed, denied []string
	for _, p := range role["Policies"].([]any) {
		for _, st := range p.(map[string]any)["PolicyDocument"].(map[string]any)["Statement"].([]any) {
			st := st.(map[string]any)
			acts, _ := st["Action"].([]any)
			for _, a := range acts {
				a := a.(string)
				if !strings.HasPrefix(a, "s3:") {
					continue
				}
				switch st["Effect"] {
				case "Allow":
					allowed = append(allowed, a)
					if a == "s3:DeleteObject" && !strings.Contains(mustJSON(st["Resource"]), `.Arn}/archive/*"`) {
						t.Errorf("the archiver may delete %s, want archive/* only", mustJSON(st["Resource"]))
					}
				case "Deny":
					denied = append(denied, a)
				}
			}
		}
	}
	for _, a := range []string{"s3:DeleteObjectVersion", "s3:PutBucketVersioning", "s3:PutLifecycleConfiguration"} {
		if slices.Contains(allowed, a) || !slices.Contains(denied, a) {
			t.Errorf("the archiver's %s: allowed %v, denied %v; want it denied", a, allowed, denied)
		}
	}
}

// TestBodyRetentionRule: with BodyRetentionDays set, the archive bucket
// expires objects under archive/ that many days after they were stored
// (the backstop of the archiver's retention pass), their noncurrent
// versions still go by the safety net's rule, and the archiver and the
// acting operator get the setting; with the default 0 there is no such
// rule and bodies are kept for ever.
func TestBodyRetentionRule(t *testing.T) {
	t.Parallel()
	retention := func(params map[string]any) (rule map[string]any, noncurrent bool) {
		_, res := load(t, params)
		for _, r := range props(t, res, "ArchiveBucket")["LifecycleConfiguration"].(map[string]any)["Rules"].([]any) {
			r := r.(map[string]any)
			if _, ok := r["ExpirationInDays"]; ok {
				rule = r
			}
			if _, ok := r["NoncurrentVersionExpiration"]; ok && r["Prefix"] == nil && r["Status"] == "Enabled" {
				noncurrent = true
			}
		}
		return rule, noncurrent
	}
	if rule, _ := retention(nil); rule != nil {
		t.Errorf("by default the bucket expires objects: %s", mustJSON(rule))
	}
	rule, noncurrent := retention(map[string]any{"BodyRetentionDays": 30})
	switch {
	case rule == nil:
		t.Fatal("BodyRetentionDays=30: no expiration rule on the archive bucket")
	case fmt.Sprint(rule["ExpirationInDays"]) != "30" || rule["Prefix"] != "archive/" || rule["Status"] != "Enabled":
		t.Errorf("BodyRetentionDays=30: rule %s, want archive/ expired after 30 days, enabled", mustJSON(rule))
	case !noncurrent:
		t.Error("BodyRetentionDays=30: no rule expires the noncurrent versions the expiry leaves")
	}
	_, res := load(t, map[string]any{"BodyRetentionDays": 30})
	for _, fn := range []string{"ArchiverFunction", "OperatorFunction"} {
		env := props(t, res, fn)["Environment"].(map[string]any)["Variables"].(map[string]any)
		if got := fmt.Sprint(env["ARCHIVE_BODY_RETENTION_DAYS"]); got != "30" {
			t.Errorf("%s: ARCHIVE_BODY_RETENTION_DAYS = %q, want 30", fn, got)
		}
	}
}

// TestOperations: every function logs to its own log group with a
// retention; the receiver, the processor and the archiver, which run
// unattended, have an alarm on their errors and on their throttles, the
// relay on its errors (alarmed), and no other function has one (the
// operator functions answer an operator at a terminal, who sees each
// failure as it happens; a failed migration fails its deploy); the API has
// one on its 5xx answers, the wake-ups on their failures; the dashboard
// (the high-volume profile's by default) shows them.
func TestOperations(t *testing.T) {
	t.Parallel()
	tpl, res := load(t, map[string]any{"Profile": highVolume})
	for _, id := range tpl.FunctionIDs() {
		lc, _ := props(t, res, id)["LoggingConfig"].(map[string]any)
		group, _ := lc["LogGroup"].(map[string]any)
		name, _ := group["Ref"].(string)
		if name == "" {
			t.Errorf("%s: no log group of its own: %v", id, lc)
			continue
		}
		if props(t, res, name)["RetentionInDays"] == nil {
			t.Errorf("%s: log group %s without retention", id, name)
		}
	}
	metrics := map[string]bool{}
	perFunction := map[string]map[string]bool{} // metric -> functions watched
	apiAlarm := false
	for _, r := range res {
		r := r.(map[string]any)
		if r["Type"] != "AWS::CloudWatch::Alarm" {
			continue
		}
		p := r["Properties"].(map[string]any)
		metric := p["MetricName"].(string)
		metrics[metric] = true
		dims, _ := p["Dimensions"].([]any)
		for _, d := range dims {
			d := d.(map[string]any)
			ref, _ := d["Value"].(map[string]any)["Ref"].(string)
			switch {
			case p["Namespace"] == "AWS/Lambda" && d["Name"] == "FunctionName":
				if perFunction[metric] == nil {
					perFunction[metric] = map[string]bool{}
				}
				perFunction[metric][ref] = true
			case p["Namespace"] == "AWS/ApiGateway" && metric == "5xx" && d["Name"] == "ApiId" && ref == "WebhookApi":
				apiAlarm = true
			}
		}
	}
	for _, m := range []string{"DeadLettered", "DeadLettersOpen", "BacklogOldestAgeSeconds", "Rejected", "Unavailable", "ArchiveStoreUnavailable", "SuspectedReplay",
		archive.MetricTableBloat, archive.MetricIndexBloat, "WakeFailed", "SourcesReloadRefused", "SourcesReloadFailed", "QuarantineNotKept"} {
		if !metrics[m] {
			t.Errorf("no alarm on %s", m)
		}
	}
	// The open dead letters' alarm stays on while any remains: the
	// largest value of the gauge over a period of several processor
	// lines, and a period with no line keeps the state instead of
	// clearing it.
	open := props(t, res, "DeadLettersOpenAlarm")
	if open["MetricName"] != "DeadLettersOpen" || open["Statistic"] != "Maximum" || open["TreatMissingData"] != "ignore" ||
		open["ComparisonOperator"] != "GreaterThanThreshold" || fmt.Sprint(open["Threshold"]) != "0" || fmt.Sprint(open["Period"]) != "300" {
		t.Errorf("DeadLettersOpenAlarm = %v", open)
	}
	// The bloat alarms fire at the threshold webhookctl stats flags.
	for _, id := range []string{"TableBloatAlarm", "IndexBloatAlarm"} {
		if th, _ := props(t, res, id)["Threshold"].(float64); th != 100*storage.DefaultBloatThreshold.Ratio {
			t.Errorf("%s: threshold %v, want %v", id, props(t, res, id)["Threshold"], 100*storage.DefaultBloatThreshold.Ratio)
		}
	}
	for _, m := range []string{"Errors", "Throttles"} {
		for _, id := range tpl.FunctionIDs() {
			if want := slices.Contains(alarmed[id], m); perFunction[m][id] != want {
				t.Errorf("alarm on %s's %s: %v, want %v", id, m, perFunction[m][id], want)
			}
		}
	}
	if !apiAlarm {
		t.Error("no alarm on the HTTP API's 5xx answers")
	}
	dash := mustJSON(props(t, res, "Dashboard"))
	for _, want := range []string{"Throttles", `\"5xx\"`, "Errors", "BacklogOldestAgeSeconds", "DeadLettersOpen", "ReceiptToProcessedP99Ms", "SuspectedReplay"} {
		if !strings.Contains(dash, want) {
			t.Errorf("the dashboard does not show %s", want)
		}
	}
	if !strings.Contains(mustJSON(evaluatedJSON(t, tpl)["Outputs"]), "/webhooks/{source}") {
		t.Error("no WebhookUrl output")
	}
}

// TestReservedConcurrencyIsOptional: by default no function reserves
// concurrency (a new account's quota of 10 leaves nothing to reserve); the
// receiver's can be set.
func TestReservedConcurrencyIsOptional(t *testing.T) {
	t.Parallel()
	_, res := load(t, nil)
	for _, id := range functionIDs {
		if v, ok := props(t, res, id)["ReservedConcurrentExecutions"]; ok {
			t.Errorf("%s reserves %v by default", id, v)
		}
	}
	_, res = load(t, map[string]any{"ReceiverReservedConcurrency": 40, "ProcessorReservedConcurrency": 4})
	if v := props(t, res, "ReceiverFunction")["ReservedConcurrentExecutions"]; v != "40" && v != float64(40) {
		t.Errorf("ReceiverReservedConcurrency=40 gives %v", v)
	}
	if v := props(t, res, "ProcessorFunction")["ReservedConcurrentExecutions"]; v != "4" && v != float64(4) {
		t.Errorf("ProcessorReservedConcurrency=4 gives %v", v)
	}
}

func mustJSON(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return string(b)
}
