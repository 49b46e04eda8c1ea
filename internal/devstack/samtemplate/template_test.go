package samtemplate_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/webhook-inbox/webhook-inbox/internal/devstack/samtemplate"
)

const (
	dbSecret      = "arn:aws:secretsmanager:eu-west-1:123456789012:secret:inbox-db-AbCdEf"
	sourcesSecret = "arn:aws:secretsmanager:eu-west-1:123456789012:secret:inbox-sources-GhIjKl"
)

// load parses the repository's template with the required parameters.
func load(t *testing.T) (*samtemplate.Template, map[string]any) {
	t.Helper()
	tpl, err := samtemplate.Open(filepath.Join("..", "..", "..", "template.yaml"), map[string]any{
		"DatabaseSecretArn": dbSecret, "SourcesSecretArn": sourcesSecret,
	})
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

// TestFunctionsBuildAndRun checks what `sam build` and the runtime need:
// the Makefile target SAM's makefile build method calls, the bootstrap
// handler, arm64 and provided.al2023, the route and the schedules.
func TestFunctionsBuildAndRun(t *testing.T) {
	t.Parallel()
	tpl, _ := load(t)
	makefile, err := os.ReadFile(filepath.Join("..", "..", "..", "Makefile"))
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"ArchiverFunction", "ProcessorFunction", "ReceiverFunction"}
	if got := tpl.FunctionIDs(); strings.Join(got, ",") != strings.Join(want, ",") {
		t.Fatalf("functions = %v, want %v", got, want)
	}
	for _, id := range want {
		f := tpl.Functions[id]
		if f.BuildMethod != "makefile" || f.Handler != "bootstrap" || f.Runtime != "provided.al2023" ||
			len(f.Architectures) != 1 || f.Architectures[0] != "arm64" || f.CodeURI != "." {
			t.Errorf("%s: %+v", id, f)
		}
		if !regexp.MustCompile(`(?m)^build-` + id + `:`).Match(makefile) {
			t.Errorf("the Makefile has no build-%s target", id)
		}
		if f.Timeout <= 0 || f.Environment["DATABASE_SECRET_ARN"] != dbSecret {
			t.Errorf("%s: timeout %v, database secret %q", id, f.Timeout, f.Environment["DATABASE_SECRET_ARN"])
		}
		for k, v := range f.Environment {
			if strings.Contains(v, "${") {
				t.Errorf("%s: %s=%q is not resolved", id, k, v)
			}
		}
	}
	rcv := tpl.Functions["ReceiverFunction"]
	if len(rcv.Routes) != 1 || rcv.Routes[0].Method != "POST" || rcv.Routes[0].Path != "/webhooks/{source}" || rcv.Routes[0].Payload != "2.0" {
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
	// The processor's drain needs its safety margin (40 s) within the timeout.
	if tpl.Functions["ProcessorFunction"].Timeout < 2*time.Minute {
		t.Errorf("processor timeout %v leaves little time after the safety margin", tpl.Functions["ProcessorFunction"].Timeout)
	}
}

// statements returns a function's inline IAM policy statements.
func statements(t *testing.T, fn map[string]any) []map[string]any {
	t.Helper()
	var out []map[string]any
	pols, _ := fn["Policies"].([]any)
	for _, p := range pols {
		doc, ok := p.(map[string]any)
		if !ok {
			t.Fatalf("policy %v is not an inline document (no managed policies or SAM templates: they grant wildcards)", p)
		}
		sts, _ := doc["Statement"].([]any)
		for _, s := range sts {
			if s == nil { // a statement under a false condition (IAM auth off)
				continue
			}
			out = append(out, s.(map[string]any))
		}
	}
	return out
}

func strs(v any) []string {
	switch x := v.(type) {
	case string:
		return []string{x}
	case []any:
		var out []string
		for _, e := range x {
			if s, ok := e.(string); ok {
				out = append(out, s)
			}
		}
		return out
	}
	return nil
}

// TestLeastPrivilege: no wildcard actions or resources, the receiver
// cannot touch S3, only the receiver can read the sources secret, only the
// archiver reaches the bucket.
func TestLeastPrivilege(t *testing.T) {
	t.Parallel()
	_, res := load(t)
	for _, id := range []string{"ReceiverFunction", "ProcessorFunction", "ArchiverFunction"} {
		var actions, resources []string
		for _, st := range statements(t, props(t, res, id)) {
			if st["Effect"] != "Allow" {
				continue
			}
			for _, a := range strs(st["Action"]) {
				if a == "*" || strings.HasSuffix(a, ":*") || strings.Contains(a, "*") {
					t.Errorf("%s: wildcard action %q", id, a)
				}
				actions = append(actions, a)
			}
			for _, r := range strs(st["Resource"]) {
				if r == "*" {
					t.Errorf("%s: wildcard resource in %v", id, st)
				}
				resources = append(resources, r)
			}
		}
		joined := strings.Join(actions, " ")
		readsSources := strings.Contains(strings.Join(resources, " "), sourcesSecret)
		switch id {
		case "ReceiverFunction":
			if strings.Contains(joined, "s3:") {
				t.Errorf("the receiver can touch S3: %v", actions)
			}
			if !readsSources {
				t.Errorf("the receiver cannot read the sources secret")
			}
		case "ProcessorFunction":
			if strings.Contains(joined, "s3:") || readsSources {
				t.Errorf("the processor has more than the database: %v %v", actions, resources)
			}
		case "ArchiverFunction":
			if readsSources {
				t.Errorf("the archiver can read the sources secret")
			}
			if !strings.Contains(joined, "s3:PutObject") {
				t.Errorf("the archiver cannot write objects: %v", actions)
			}
		}
	}
}

func TestArchiveBucketIsLockedDown(t *testing.T) {
	t.Parallel()
	_, res := load(t)
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
	if _, versioned := b["VersioningConfiguration"]; versioned {
		t.Error("versioning would keep expunged bytes in old versions")
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

func TestOperations(t *testing.T) {
	t.Parallel()
	tpl, res := load(t)
	for _, id := range tpl.FunctionIDs() {
		lg := props(t, res, strings.TrimSuffix(id, "Function")+"LogGroup")
		if lg["RetentionInDays"] == nil {
			t.Errorf("%s: log group without retention", id)
		}
	}
	metrics := map[string]bool{}
	errorAlarms := 0
	for _, r := range res {
		r := r.(map[string]any)
		if r["Type"] != "AWS::CloudWatch::Alarm" {
			continue
		}
		p := r["Properties"].(map[string]any)
		metrics[p["MetricName"].(string)] = true
		if p["MetricName"] == "Errors" && p["Namespace"] == "AWS/Lambda" {
			errorAlarms++ // the FunctionName dimension is a !Ref, unresolved here
		}
	}
	for _, m := range []string{"DeadLettered", "BacklogOldestAgeSeconds", "Rejected", "Errors", "Unavailable", "ArchiveStoreUnavailable"} {
		if !metrics[m] {
			t.Errorf("no alarm on %s", m)
		}
	}
	if errorAlarms != len(tpl.Functions) {
		t.Errorf("function error alarms = %d, want one per function", errorAlarms)
	}
	if res["Dashboard"] == nil {
		t.Error("no dashboard")
	}
	m, _ := tpl.JSON()
	if !strings.Contains(mustJSON(m["Outputs"]), "/webhooks/{source}") {
		t.Error("no WebhookUrl output")
	}
}

func mustJSON(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return string(b)
}

// sam local only overrides variables the template declares, so every
// variable env.json sets must be declared for its function.
func TestEnvJSONOverridesDeclaredVariables(t *testing.T) {
	t.Parallel()
	tpl, _ := load(t)
	raw, err := os.ReadFile(filepath.Join("..", "..", "..", "env.json"))
	if err != nil {
		t.Fatal(err)
	}
	var env map[string]map[string]string
	if err := json.Unmarshal(raw, &env); err != nil {
		t.Fatal(err)
	}
	for id, vars := range env {
		f, ok := tpl.Functions[id]
		if !ok {
			t.Errorf("env.json names %s, which the template lacks", id)
			continue
		}
		for k := range vars {
			if _, ok := f.Environment[k]; !ok {
				t.Errorf("env.json sets %s for %s, which the template does not declare (sam local would ignore it)", k, id)
			}
		}
	}
}
