package samtemplate_test

import (
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/webhook-inbox/webhook-inbox/internal/devstack/samtemplate"
	"github.com/webhook-inbox/webhook-inbox/shared/archive"
	"github.com/webhook-inbox/webhook-inbox/shared/operations"
	"github.com/webhook-inbox/webhook-inbox/shared/processor"
	"github.com/webhook-inbox/webhook-inbox/shared/storage"
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
	m, err := tpl.JSON()
	if err != nil {
		t.Fatal(err)
	}
	return tpl, m["Resources"].(map[string]any)
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

var functionIDs = []string{"ArchiverFunction", "MigrationFunction", "OperatorFunction", "OperatorReadFunction", "ProcessorFunction", "ReceiverFunction"}

// TestFunctionsBuildAndRun checks what `sam build` and the runtime need:
// the Makefile target SAM's makefile build method calls, the bootstrap
// handler, arm64 and provided.al2023, the route and the schedules.
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
	for _, id := range functionIDs {
		f := tpl.Functions[id]
		if f.BuildMethod != "makefile" || f.Handler != "bootstrap" || f.Runtime != "provided.al2023" ||
			len(f.Architectures) != 1 || f.Architectures[0] != "arm64" || f.CodeURI != "." {
			t.Errorf("%s: %+v", id, f)
		}
		if !regexp.MustCompile(`(?m)^build-` + id + `:`).Match(makefile) {
			t.Errorf("the Makefile has no build-%s target", id)
		}
		if f.Timeout <= 0 {
			t.Errorf("%s: timeout %v", id, f.Timeout)
		}
		// sam local overrides only declared variables: the database's
		// are declared for every function.
		for _, k := range []string{"DATABASE_URL", "DATABASE_SECRET_ARN", "DATABASE_HOST", "DATABASE_PORT", "DATABASE_NAME", "DATABASE_IAM_AUTH", "DATABASE_SSLMODE"} {
			if _, ok := f.Environment[k]; !ok {
				t.Errorf("%s does not declare %s", id, k)
			}
		}
		for k, v := range f.Environment {
			if strings.Contains(v, "${") {
				t.Errorf("%s: %s=%q is not resolved", id, k, v)
			}
		}
	}
	rcv := tpl.Functions["ReceiverFunction"]
	// Sorted by event name: the tokened route, then the untokened one.
	if len(rcv.Routes) != 2 || rcv.Routes[0].Method != "POST" || rcv.Routes[0].Path != "/webhooks/{source}/{token}" || rcv.Routes[0].Payload != "2.0" ||
		rcv.Routes[1].Method != "POST" || rcv.Routes[1].Path != "/webhooks/{source}" || rcv.Routes[1].Payload != "2.0" {
		t.Errorf("receiver routes = %+v", rcv.Routes)
	}
	if rcv.Environment["WEBHOOK_MAX_BODY_BYTES"] != "1048576" {
		t.Errorf("WEBHOOK_MAX_BODY_BYTES = %q", rcv.Environment["WEBHOOK_MAX_BODY_BYTES"])
	}
	for id, every := range map[string]time.Duration{"ProcessorFunction": time.Minute, "ArchiverFunction": time.Hour} {
		f := tpl.Functions[id]
		if len(f.Schedules) != 1 || !f.Schedules[0].Enabled {
			t.Fatalf("%s schedules = %+v", id, f.Schedules)
		}
		if d, err := samtemplate.ParseRate(f.Schedules[0].Expression); err != nil || d != every {
			t.Errorf("%s schedule %q = %v, %v; want %v", id, f.Schedules[0].Expression, d, err, every)
		}
		if len(f.Routes) != 0 {
			t.Errorf("%s must not be reachable over HTTP", id)
		}
	}
	mig := tpl.Functions["MigrationFunction"]
	if len(mig.Routes)+len(mig.Schedules) != 0 {
		t.Errorf("the migration function runs for CloudFormation only: %+v %+v", mig.Routes, mig.Schedules)
	}
	// The operator function, twice: reached through its function URL only
	// (checked on the translated template), its timeout that of a page
	// (read) or of an action bounded per call (act).
	for id, timeout := range map[string]time.Duration{"OperatorReadFunction": 2 * time.Minute, "OperatorFunction": 5 * time.Minute} {
		f := tpl.Functions[id]
		if len(f.Routes)+len(f.Schedules) != 0 {
			t.Errorf("%s is reached through its function URL only: %+v %+v", id, f.Routes, f.Schedules)
		}
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
	// Migrations may rewrite a large table; Lambda stops at 15 minutes.
	if mig.Timeout < 10*time.Minute || mig.Timeout > 15*time.Minute {
		t.Errorf("migration timeout %v", mig.Timeout)
	}
	// The processor's drain needs its safety margin (40 s) within the timeout.
	if tpl.Functions["ProcessorFunction"].Timeout < 2*time.Minute {
		t.Errorf("processor timeout %v leaves little time after the safety margin", tpl.Functions["ProcessorFunction"].Timeout)
	}
}

// TestProcessorRunsInRealTime: by default each processor invocation polls
// for longer than the schedule's period, so the next one is polling before
// it stops, and its run plus the safety margin the processor keeps after
// it fits in the function's timeout, with the values the processor itself
// reads from the template's environment; ProcessorRealTime=disabled makes
// each invocation one drain. Either way the processor knows the archive's
// bucket (replays of archived events).
func TestProcessorRunsInRealTime(t *testing.T) {
	t.Parallel()
	for _, realTime := range []string{"enabled", "disabled"} {
		tpl, res := load(t, map[string]any{"ProcessorRealTime": realTime})
		fn := tpl.Functions["ProcessorFunction"]
		env := maps.Clone(fn.Environment)
		env["DATABASE_URL"] = "postgres://template-test@127.0.0.1:1/x" // the secret's, in AWS
		c, err := processor.ConfigFromEnv(func(k string) string { return env[k] })
		if err != nil {
			t.Fatalf("%s: the processor refuses the template's environment: %v", realTime, err)
		}
		period, err := samtemplate.ParseRate(fn.Schedules[0].Expression)
		if err != nil {
			t.Fatal(err)
		}
		if realTime == "disabled" {
			if c.RunFor != 0 || period != time.Minute {
				t.Errorf("real time disabled: run for %s, schedule %s; want one drain a minute", c.RunFor, period)
			}
		} else {
			if c.RunFor <= period || c.RunFor > period+15*time.Second {
				t.Errorf("each invocation polls %s on a %s schedule: want a little longer, so that one is always polling", c.RunFor, period)
			}
			if c.PollInterval > 200*time.Millisecond {
				t.Errorf("poll interval %s: an event would wait longer than real time allows", c.PollInterval)
			}
		}
		if fn.Timeout <= c.RunFor+c.SafetyMargin {
			t.Errorf("%s: timeout %s leaves no room for the run (%s) and its safety margin (%s)", realTime, fn.Timeout, c.RunFor, c.SafetyMargin)
		}
		vars := props(t, res, "ProcessorFunction")["Environment"].(map[string]any)["Variables"].(map[string]any)
		if bucket := mustJSON(vars["ARCHIVE_BUCKET"]); bucket != `{"Ref":"ArchiveBucket"}` {
			t.Errorf("%s: the processor's ARCHIVE_BUCKET = %s, want the archive's bucket", realTime, bucket)
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
// accepts each deployment's environment, as it reads it (a Ref is known
// once deployed: a value stands in for the bucket), with the access the
// deployment says and the archive's settings the archiver has.
func TestOperatorFunctionsReadTheirEnvironment(t *testing.T) {
	t.Parallel()
	tpl, _ := load(t, map[string]any{"ArchiveMinAge": "48h", "ArchiveBatchSize": 250})
	arch := tpl.Functions["ArchiverFunction"].Environment
	for id, access := range map[string]operations.Access{"OperatorReadFunction": operations.AccessRead, "OperatorFunction": operations.AccessAct} {
		env := maps.Clone(tpl.Functions[id].Environment)
		env["DATABASE_URL"] = "postgres://template-test@127.0.0.1:1/x" // the secret's, in AWS
		env["ARCHIVE_BUCKET"] = "archive-bucket"                       // !Ref ArchiveBucket
		c, err := operations.ConfigFromEnv(func(k string) string { return env[k] })
		if err != nil {
			t.Fatalf("%s refuses the template's environment: %v", id, err)
		}
		if c.Access != access || c.Archive == nil || c.Archive.Prefix != "archive" || c.Archive.MinAge != 48*time.Hour || c.Archive.BatchSize != 250 {
			t.Errorf("%s: access %q, archive %+v", id, c.Access, c.Archive)
		}
		for _, k := range []string{"ARCHIVE_PREFIX", "ARCHIVE_MIN_AGE", "ARCHIVE_BATCH_SIZE", "S3_ENDPOINT", "S3_ACCESS_KEY_ID", "S3_SECRET_ACCESS_KEY"} {
			if v, ok := tpl.Functions[id].Environment[k]; !ok || v != arch[k] {
				t.Errorf("%s: %s=%q, the archiver's %q", id, k, v, arch[k])
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

// TestOperations: every function logs to its own log group with a
// retention, and every function that runs unattended has an alarm on its
// errors and on its throttles (the operator functions answer an operator
// at a terminal, who sees each failure as it happens); the API has one on
// its 5xx answers; the dashboard shows them.
func TestOperations(t *testing.T) {
	t.Parallel()
	tpl, res := load(t, nil)
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
		archive.MetricTableBloat, archive.MetricIndexBloat} {
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
			if !perFunction[m][id] && id != "OperatorFunction" && id != "OperatorReadFunction" {
				t.Errorf("no alarm on %s's %s", id, m)
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
	m, _ := tpl.JSON()
	if !strings.Contains(mustJSON(m["Outputs"]), "/webhooks/{source}") {
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
	_, res = load(t, map[string]any{"ReceiverReservedConcurrency": 40})
	if v := props(t, res, "ReceiverFunction")["ReservedConcurrentExecutions"]; v != "40" && v != float64(40) {
		t.Errorf("ReceiverReservedConcurrency=40 gives %v", v)
	}
}

func mustJSON(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return string(b)
}
