package samtemplate_test

import (
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/webhook-inbox/webhook-inbox/internal/devstack/samtemplate"
	"github.com/webhook-inbox/webhook-inbox/shared/relay"
	"github.com/webhook-inbox/webhook-inbox/shared/wake"
)

// These checks hold every profile to its way of waking the processor and
// the archiver (shared/wake, docs/processor.md "Waking the processor"):
// nothing polls while the stack is idle; the receiver (and the acting
// operator function) wakes the processor after each commit, with an
// asynchronous invoke through the Lambda endpoint or, in economy, a
// marker object that EventBridge turns into an invocation; later wake-ups
// are markers the relay, outside the VPC, turns into one-time EventBridge
// Scheduler schedules; and the receiver reads its sources from the relay's
// copy in the control bucket.

// wakers are the functions that wake the processor at once (WAKE_MODE).
var wakers = map[string]bool{"ReceiverFunction": true, "OperatorFunction": true}

// armers are the functions that write wake-up markers to the control
// bucket (WAKE_BUCKET): the wakers (wake/now/ in economy, and the sweep's
// wake/arm/processor/), the processor (its retries, its leases, the
// archiver) and the archiver (its own next run).
var armers = map[string]bool{"ReceiverFunction": true, "OperatorFunction": true, "ProcessorFunction": true, "ArchiverFunction": true}

// duration parses a template's duration value ("500ms", "1s").
func duration(t *testing.T, what string, v any) time.Duration {
	t.Helper()
	s, _ := v.(string)
	d, err := time.ParseDuration(s)
	if err != nil {
		t.Errorf("%s = %v: not a duration: %v", what, canon(v), err)
	}
	return d
}

// checkWake: the wakers wake the processor as the profile says (an
// invoke of ProcessorFunction, or a marker in the control bucket in
// economy), may invoke the processor only and only when they invoke it,
// and wait for the Lambda endpoint they invoke through; every armer knows
// the control bucket; the processor's linger (PROCESSOR_RUN_FOR) outlasts
// every waker's debounce, so a debounced receipt is never left behind; in
// economy ProcessorWakeRule turns the wake/now/ markers into invocations.
// Every way a wake-up reaches the processor or the archiver asynchronously
// gives up on one that waited too long (Lambda's default is 6 hours,
// EventBridge's 24: https://docs.aws.amazon.com/lambda/latest/dg/invocation-async-error-handling.html).
func (d deployed) checkWake(t *testing.T) {
	t.Helper()
	processor := envOf(d.res["ProcessorFunction"])
	runFor := duration(t, "the processor's PROCESSOR_RUN_FOR", processor["PROCESSOR_RUN_FOR"])
	if poll := duration(t, "the processor's PROCESSOR_POLL_INTERVAL", processor["PROCESSOR_POLL_INTERVAL"]); poll <= 0 || poll >= runFor {
		t.Errorf("the processor polls every %v while it lingers %v", poll, runFor)
	}
	if canon(processor["ARCHIVE_MIN_AGE"]) != canon(d.st.Param("ArchiveMinAge")) {
		t.Errorf("the processor arms the archiver after %v, the archiver archives after %v", processor["ARCHIVE_MIN_AGE"], d.st.Param("ArchiveMinAge"))
	}
	endpoint := any("")
	if d.lambdaEndpoint() {
		endpoint = map[string]any{"Ref": "LambdaEndpoint"}
	}
	for fn := range dbRoles {
		env := envOf(d.res[fn])
		if armers[fn] && canon(env["WAKE_BUCKET"]) != canon(map[string]any{"Ref": "ControlBucket"}) {
			t.Errorf("%s: WAKE_BUCKET = %v, want the control bucket", fn, canon(env["WAKE_BUCKET"]))
		}
		// The wakers' debounce is what the linger must outlast; the
		// processor's own (Globals') too, which processor.ConfigFromEnv
		// refuses when it is not below the linger.
		if wakers[fn] || fn == "ProcessorFunction" {
			if debounce := duration(t, fn+"'s WAKE_DEBOUNCE", env["WAKE_DEBOUNCE"]); debounce < 0 || debounce >= runFor || debounce > wake.MaxDebounce {
				t.Errorf("%s's WAKE_DEBOUNCE is %v, the processor lingers %v after each wake-up: a debounced receipt would wait for the sweep", fn, debounce, runFor)
			}
		}
		invokes := allowed(d.roleOf(fn))["lambda:InvokeFunction"]
		var wantInvokes []string
		switch {
		case wakers[fn]:
			if env["WAKE_MODE"] != d.wakeMode() || canon(env["WAKE_FUNCTION"]) != canon(map[string]any{"Ref": "ProcessorFunction"}) || canon(env["WAKE_ENDPOINT"]) != canon(endpoint) {
				t.Errorf("%s: WAKE_MODE=%v WAKE_FUNCTION=%v WAKE_ENDPOINT=%v; want %s, the processor, endpoint %s", fn, env["WAKE_MODE"], canon(env["WAKE_FUNCTION"]), canon(env["WAKE_ENDPOINT"]), d.wakeMode(), canon(endpoint))
			}
			if d.lambdaEndpoint() != d.dependsOn(fn, "LambdaEndpoint") {
				t.Errorf("%s waits for the Lambda endpoint = %v, want %v: it waits for the endpoint it invokes through, and only then", fn, !d.lambdaEndpoint(), d.lambdaEndpoint())
			}
			if !d.economy() {
				wantInvokes = []string{canon(map[string]any{"Fn::GetAtt": []any{"ProcessorFunction", "Arn"}})}
			}
		case fn == "MigrationFrontFunction":
			wantInvokes = []string{canon(map[string]any{"Fn::GetAtt": []any{"MigrationFunction", "Arn"}}), canon(sub("${MigrationFunction.Arn}:*"))}
		default:
			if v, ok := env["WAKE_MODE"]; ok {
				t.Errorf("%s: WAKE_MODE=%v; it wakes nothing at once", fn, v)
			}
		}
		if !slices.Equal(invokes, wantInvokes) {
			t.Errorf("%s may invoke %v, want %v", fn, invokes, wantInvokes)
		}
	}
	receiver := d.res["ReceiverFunction"].Properties
	storeTimeout, timeout := "5s", 15*time.Second
	if d.economy() {
		// The first event after the database paused waits for it to
		// resume (about 15 s) rather than being refused.
		storeTimeout, timeout = "25s", 30*time.Second
	}
	if env := envOf(d.res["ReceiverFunction"]); env["WEBHOOK_STORE_TIMEOUT"] != storeTimeout || seconds(receiver, "Timeout") != timeout ||
		duration(t, "WEBHOOK_STORE_TIMEOUT", env["WEBHOOK_STORE_TIMEOUT"]) >= timeout {
		t.Errorf("%s: the receiver stores within %v in a function of %v s; want %s within %v", d.profile, env["WEBHOOK_STORE_TIMEOUT"], receiver["Timeout"], storeTimeout, timeout)
	}
	for fn, want := range map[string]string{"ProcessorFunction": `{"MaximumEventAgeInSeconds":900,"MaximumRetryAttempts":2}`, "ArchiverFunction": `{"MaximumEventAgeInSeconds":3600,"MaximumRetryAttempts":2}`} {
		got := ""
		for _, r := range d.res {
			if r.Type == "AWS::Lambda::EventInvokeConfig" && target(r.Properties["FunctionName"]) == fn && r.Properties["Qualifier"] == "$LATEST" {
				got = canon(map[string]any{"MaximumEventAgeInSeconds": r.Properties["MaximumEventAgeInSeconds"], "MaximumRetryAttempts": r.Properties["MaximumRetryAttempts"]})
			}
		}
		if got != want {
			t.Errorf("%s's asynchronous invocations %s, want %s", fn, got, want)
		}
	}
	rule, ok := d.res["ProcessorWakeRule"]
	if ok != d.economy() {
		t.Errorf("%s: ProcessorWakeRule made = %v, want %v", d.profile, ok, d.economy())
	}
	if !ok {
		return
	}
	// S3 announces each object created in the control bucket to
	// EventBridge (https://docs.aws.amazon.com/AmazonS3/latest/userguide/EventBridge.html);
	// the rule takes the wake/now/ markers only (wake/arm/ is the relay's).
	pattern := objectCreated(wake.PrefixNow)
	if got := canon(rule.Properties["EventPattern"]); got != pattern {
		t.Errorf("ProcessorWakeRule matches %s, want %s", got, pattern)
	}
	targets, _ := rule.Properties["Targets"].([]any)
	if len(targets) != 1 || target(targets[0].(map[string]any)["Arn"]) != "ProcessorFunction" {
		t.Errorf("ProcessorWakeRule targets %s, want the processor", canon(targets))
	} else if age := seconds(targets[0].(map[string]any)["RetryPolicy"], "MaximumEventAgeInSeconds"); age <= 0 || age > time.Hour {
		t.Errorf("ProcessorWakeRule keeps a wake-up for %v, want at most an hour", age)
	}
	perm := d.res["ProcessorWakePermission"].Properties
	if target(perm["FunctionName"]) != "ProcessorFunction" || perm["Principal"] != "events.amazonaws.com" || perm["Action"] != "lambda:InvokeFunction" ||
		canon(perm["SourceArn"]) != canon(map[string]any{"Fn::GetAtt": []any{"ProcessorWakeRule", "Arn"}}) {
		t.Errorf("ProcessorWakePermission %s, want EventBridge invoking the processor for ProcessorWakeRule only", canon(perm))
	}
}

// objectCreated is the EventBridge pattern of an object created in the
// control bucket under prefix.
func objectCreated(prefix string) string {
	return canon(map[string]any{
		"source":      []any{"aws.s3"},
		"detail-type": []any{"Object Created"},
		"detail": map[string]any{
			"bucket": map[string]any{"name": []any{map[string]any{"Ref": "ControlBucket"}}},
			"object": map[string]any{"key": []any{map[string]any{"prefix": prefix}}},
		},
	})
}

// checkSources: the receiver reads its sources from the relay's copy in the
// control bucket (WEBHOOK_SOURCES_OBJECT, the key the relay writes), which
// its role may read, and cannot read the sources secret. Nothing but the
// relay may read the secret; the custom resource SourcesCopy has the relay
// copy it at every deploy, before the receiver serves.
func (d deployed) checkSources(t *testing.T) {
	t.Helper()
	env := envOf(d.res["ReceiverFunction"])
	if want := canon(sub("s3://${ControlBucket}/" + relay.DefaultSourcesKey)); canon(env["WEBHOOK_SOURCES_OBJECT"]) != want || env["WEBHOOK_SOURCES"] != "" {
		t.Errorf("the receiver's sources: WEBHOOK_SOURCES_OBJECT=%s, WEBHOOK_SOURCES=%v; want %s", canon(env["WEBHOOK_SOURCES_OBJECT"]), env["WEBHOOK_SOURCES"], want)
	}
	if v, ok := env["WEBHOOK_SOURCES_SECRET_ARN"]; ok {
		t.Errorf("the receiver reads the sources secret %v: it has no way to Secrets Manager in create mode", v)
	}
	if got := allowed(d.roleOf("ReceiverFunction"))["s3:GetObject"]; !slices.Equal(got, []string{controlObjects(relay.DefaultSourcesKey)}) {
		t.Errorf("the receiver may read %v, want the sources copy only", got)
	}
	for fn := range dbRoles {
		reads := allowed(d.roleOf(fn))["secretsmanager:GetSecretValue"]
		if slices.Contains(reads, canon(sourcesSecret)) != (fn == "RelayFunction") {
			t.Errorf("%s may read the sources secret: %v", fn, slices.Contains(reads, canon(sourcesSecret)))
		}
		if d.create && d.inVpc(fn) && len(reads) > 0 {
			t.Errorf("%s, in create mode's VPC, may read secrets %v it has no way to", fn, reads)
		}
	}
	renv := envOf(d.res["RelayFunction"])
	if renv["RELAY_SOURCES_SECRET_ARN"] != sourcesSecret {
		t.Errorf("the relay copies %v, want the sources secret", renv["RELAY_SOURCES_SECRET_ARN"])
	}
	if v, ok := renv["RELAY_SOURCES_KEY"]; ok && v != relay.DefaultSourcesKey {
		t.Errorf("the relay copies to %v, the receiver reads %s", v, relay.DefaultSourcesKey)
	}
	copyProps := d.res["SourcesCopy"].Properties
	if copyProps["SecretArn"] != sourcesSecret || canon(copyProps["Bucket"]) != canon(map[string]any{"Ref": "ControlBucket"}) {
		t.Errorf("SourcesCopy %s: its properties change with the secret and the bucket, so that CloudFormation sends Update when either is replaced", canon(copyProps))
	}
	if !slices.Contains(d.res["ReceiverFunction"].DependsOn, "SourcesCopy") {
		t.Error("the receiver may serve before the sources are copied")
	}
	// CloudFormation waits ServiceTimeout for the relay's answer, which it
	// gives within its own timeout.
	if wait, relay := seconds(copyProps, "ServiceTimeout"), seconds(d.res["RelayFunction"].Properties, "Timeout"); relay <= 0 || wait < relay || wait > time.Hour {
		t.Errorf("SourcesCopy's ServiceTimeout %v, the relay's timeout %v", wait, relay)
	}
}

// checkControlBucket: the control bucket announces its objects to
// EventBridge, expires the markers after a day, blocks public access,
// encrypts, and is the stack's to delete (SourcesCopy empties it); its
// policy refuses plain HTTP, and every read of config/ (the senders'
// signing secrets) but the receiver's and the relay's, whose roles are
// the only ones allowed to read there.
func (d deployed) checkControlBucket(t *testing.T) {
	t.Helper()
	b := d.res["ControlBucket"].Properties
	if canon(b["NotificationConfiguration"]) != `{"EventBridgeConfiguration":{"EventBridgeEnabled":true}}` {
		t.Errorf("the control bucket's notifications %s, want EventBridge only", canon(b["NotificationConfiguration"]))
	}
	if got := canon(b["LifecycleConfiguration"]); got != `{"Rules":[{"ExpirationInDays":1,"Id":"expire-markers","Prefix":"wake/","Status":"Enabled"}]}` {
		t.Errorf("the control bucket's lifecycle %s, want wake/ expired after a day", got)
	}
	pab, _ := b["PublicAccessBlockConfiguration"].(map[string]any)
	for _, k := range []string{"BlockPublicAcls", "BlockPublicPolicy", "IgnorePublicAcls", "RestrictPublicBuckets"} {
		if pab[k] != true {
			t.Errorf("the control bucket's public access block %s = %v", k, pab[k])
		}
	}
	if !strings.Contains(canon(b["BucketEncryption"]), `"SSEAlgorithm":"AES256"`) {
		t.Errorf("the control bucket's encryption %s", canon(b["BucketEncryption"]))
	}
	if r := translated(t)["Resources"].(map[string]any)["ControlBucket"].(map[string]any); r["DeletionPolicy"] != nil && r["DeletionPolicy"] != "Delete" {
		t.Errorf("the control bucket's DeletionPolicy %v: the stack empties and deletes it", r["DeletionPolicy"])
	}
	pol := d.res["ControlBucketPolicy"].Properties
	if target(pol["Bucket"]) != "ControlBucket" {
		t.Errorf("ControlBucketPolicy is on %v", pol["Bucket"])
	}
	var got []string
	for _, st := range policyStatements(pol["PolicyDocument"]) {
		got = append(got, withoutSid(st))
	}
	want := []string{
		canon(map[string]any{"Effect": "Deny", "Principal": "*", "Action": "s3:*",
			"Resource":  []any{map[string]any{"Fn::GetAtt": []any{"ControlBucket", "Arn"}}, sub("${ControlBucket.Arn}/*")},
			"Condition": map[string]any{"Bool": map[string]any{"aws:SecureTransport": "false"}}}),
		canon(map[string]any{"Effect": "Deny", "Principal": "*", "Action": "s3:GetObject", "Resource": sub("${ControlBucket.Arn}/config/*"),
			"Condition": map[string]any{"ArnNotEquals": map[string]any{"aws:PrincipalArn": []any{
				map[string]any{"Fn::GetAtt": []any{"ReceiverRole", "Arn"}}, map[string]any{"Fn::GetAtt": []any{"RelayRole", "Arn"}},
				map[string]any{"Fn::GetAtt": []any{"OperatorRole", "Arn"}}}}}}),
	}
	sort.Strings(got)
	sort.Strings(want)
	if !slices.Equal(got, want) {
		t.Errorf("ControlBucketPolicy\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	var readers []string
	for id, r := range d.res {
		if r.Type != "AWS::IAM::Role" {
			continue
		}
		for _, res := range allowed(r)["s3:GetObject"] {
			if strings.Contains(res, "${ControlBucket.Arn}/") && !slices.Contains(readers, id) {
				readers = append(readers, id)
			}
		}
	}
	sort.Strings(readers)
	if !slices.Equal(readers, []string{"OperatorRole", "ReceiverRole", "RelayRole"}) {
		t.Errorf("roles that may read the control bucket: %v, want the receiver's, the relay's and the acting operator's (a re-ingest)", readers)
	}
}

// relayMay is every action the relay's role may take, with the resources
// it may take it on: its logs; the sources secret; its bucket's objects
// and the bucket itself; schedules in its own group; and its schedules'
// role, passed to EventBridge Scheduler only. relayNeeds is what its code
// calls, so that a role missing one fails here rather than in AWS: the
// copy (GetSecretValue, PutObject), arming (CreateSchedule, PassRole), and
// the Delete that empties the bucket (ListObjectVersions, which needs
// s3:ListBucketVersions, then DeleteObjects, which checks s3:DeleteObject
// per key): docs/relay.md, "IAM".
var (
	relayMay = map[string][]string{
		"logs:CreateLogStream":          {canon(map[string]any{"Fn::GetAtt": []any{"RelayLogGroup", "Arn"}})},
		"logs:PutLogEvents":             {canon(map[string]any{"Fn::GetAtt": []any{"RelayLogGroup", "Arn"}})},
		"secretsmanager:GetSecretValue": {canon(sourcesSecret)},
		"s3:PutObject":                  {controlObjects("config/*")},
		"s3:GetObject":                  {controlObjects("config/*")},
		"s3:DeleteObject":               {controlObjects("config/*"), controlObjects("wake/*")},
		"s3:DeleteObjectVersion":        {controlObjects("config/*"), controlObjects("wake/*")},
		"s3:ListBucket":                 {controlBucket},
		"s3:ListBucketVersions":         {controlBucket},
		"scheduler:CreateSchedule":      {canon("arn:aws:scheduler:us-east-1:123456789012:schedule/webhook-inbox-wake/*")},
		"iam:PassRole":                  {canon(map[string]any{"Fn::GetAtt": []any{"SchedulerRole", "Arn"}})},
	}
	relayNeeds = []string{"logs:PutLogEvents", "secretsmanager:GetSecretValue", "s3:PutObject", "s3:ListBucketVersions", "s3:DeleteObject",
		"s3:DeleteObjectVersion", "scheduler:CreateSchedule", "iam:PassRole"}
	// processorARN and archiverARN are the functions' ARNs by their names,
	// as the relay and the schedules' role name them (see
	// TestMarkerWritersGoBeforeTheBucketIsEmptied).
	processorARN = "arn:aws:lambda:us-east-1:123456789012:function:webhook-inbox-processor"
	archiverARN  = "arn:aws:lambda:us-east-1:123456789012:function:webhook-inbox-archiver"
)

// checkRelay: the relay runs outside the VPC with the permissions of
// relayMay (and every one of relayNeeds), PassRole only towards EventBridge
// Scheduler; its environment names the control bucket, the sources secret,
// the schedule group, the schedules' role and the two functions they wake
// (as ARNs, which it requires); and EventBridge invokes it for the arming
// markers and for a new current version of the sources secret, each
// through a rule of its own:
// https://docs.aws.amazon.com/secretsmanager/latest/userguide/secret-event-notifications.html
func (d deployed) checkRelay(t *testing.T) {
	t.Helper()
	role := d.roleOf("RelayFunction")
	may := allowed(role)
	for action, res := range may {
		if want, ok := relayMay[action]; !ok || !slices.Equal(res, want) {
			t.Errorf("the relay may %s on %v, want %v", action, res, want)
		}
	}
	for _, action := range relayNeeds {
		if _, ok := may[action]; !ok {
			t.Errorf("the relay's role lacks %s, which its code calls", action)
		}
	}
	for _, st := range statements(role) {
		if slices.Contains(samtemplate.Strings(st["Action"]), "iam:PassRole") &&
			canon(st["Condition"]) != `{"StringEquals":{"iam:PassedToService":"scheduler.amazonaws.com"}}` {
			t.Errorf("the relay passes the scheduler role under %s, want to scheduler.amazonaws.com only", canon(st["Condition"]))
		}
	}
	env := envOf(d.res["RelayFunction"])
	for k, v := range map[string]any{
		"RELAY_CONTROL_BUCKET":     map[string]any{"Ref": "ControlBucket"},
		"RELAY_SCHEDULE_GROUP":     "webhook-inbox-wake",
		"RELAY_SCHEDULER_ROLE_ARN": map[string]any{"Fn::GetAtt": []any{"SchedulerRole", "Arn"}},
		"RELAY_PROCESSOR_ARN":      processorARN,
		"RELAY_ARCHIVER_ARN":       archiverARN,
		// It uses no database, so it waits for none.
		"DATABASE_HOST": "",
		"DATABASE_PORT": "",
	} {
		if canon(env[k]) != canon(v) {
			t.Errorf("the relay's %s = %s, want %s", k, canon(env[k]), canon(v))
		}
	}
	rules := map[string]string{}
	for id, r := range d.res {
		if r.Type != "AWS::Events::Rule" {
			continue
		}
		targets, _ := r.Properties["Targets"].([]any)
		for _, tg := range targets {
			tm := tg.(map[string]any)
			if target(tm["Arn"]) != "RelayFunction" {
				continue
			}
			rules[id] = canon(r.Properties["EventPattern"])
			if age := seconds(tm["RetryPolicy"], "MaximumEventAgeInSeconds"); age <= 0 || age > 24*time.Hour {
				t.Errorf("%s keeps the relay's events %v", id, age)
			}
		}
	}
	want := map[string]string{
		"RelayFunctionArm": objectCreated(wake.PrefixArm),
		"RelayFunctionSourcesChanged": canon(map[string]any{"source": []any{"aws.secretsmanager"}, "detail-type": []any{"Secret Label Updated"},
			"resources": []any{sourcesSecret}, "detail": map[string]any{"labelUpdated": []any{"AWSCURRENT"}}}),
	}
	if canon(rules) != canon(want) {
		t.Errorf("the relay's rules\n%s\nwant\n%s", canon(rules), canon(want))
	}
	for id := range want {
		perm := d.res[id+"Permission"].Properties
		if target(perm["FunctionName"]) != "RelayFunction" || perm["Principal"] != "events.amazonaws.com" || target(perm["SourceArn"]) != id {
			t.Errorf("%sPermission %s, want EventBridge invoking the relay for %s only", id, canon(perm), id)
		}
	}
}

// checkScheduler: the wake-up schedules live in the stack's own group and
// invoke their targets as SchedulerRole, which only EventBridge Scheduler
// may assume, for this account only (the confused-deputy condition:
// https://docs.aws.amazon.com/scheduler/latest/UserGuide/setting-up.html#setting-up-execution-role),
// and which may invoke the processor and the archiver and nothing else.
func (d deployed) checkScheduler(t *testing.T) {
	t.Helper()
	if g := d.res["WakeScheduleGroup"]; g.Type != "AWS::Scheduler::ScheduleGroup" || g.Properties["Name"] != "webhook-inbox-wake" {
		t.Errorf("WakeScheduleGroup %s %s", g.Type, canon(g.Properties))
	}
	role := d.res["SchedulerRole"]
	trust := policyStatements(role.Properties["AssumeRolePolicyDocument"])
	want := canon(map[string]any{"Effect": "Allow", "Principal": map[string]any{"Service": "scheduler.amazonaws.com"}, "Action": "sts:AssumeRole",
		"Condition": map[string]any{"StringEquals": map[string]any{"aws:SourceAccount": "123456789012"}}})
	if len(trust) != 1 || withoutSid(trust[0]) != want {
		t.Errorf("SchedulerRole's trust %s, want %s", canon(trust), want)
	}
	if _, ok := role.Properties["ManagedPolicyArns"]; ok {
		t.Errorf("SchedulerRole has managed policies %v", role.Properties["ManagedPolicyArns"])
	}
	wantMay := map[string][]string{"lambda:InvokeFunction": {canon(archiverARN), canon(processorARN)}}
	if got := allowed(role); canon(got) != canon(wantMay) {
		t.Errorf("SchedulerRole may %s, want %s", canon(got), canon(wantMay))
	}
}

// TestNoProfilePollsAtIdle: in every profile and mode, nothing invokes a
// function on a timetable: no EventBridge rule with a ScheduleExpression,
// no EventBridge Scheduler schedule in the template (what the relay makes
// is one-time, and deletes itself), so no SAM Schedule or ScheduleV2 event
// either (SAM translates them into those), no event source mapping
// (Lambda's pollers), no S3 notification straight to a function. The
// processor and the archiver are invoked only by who wakes them: the
// receiver and the acting operator function (their identity policies, not
// in economy), the schedules' role, and in economy ProcessorWakeRule.
func TestNoProfilePollsAtIdle(t *testing.T) {
	t.Parallel()
	for _, sc := range scenarios {
		t.Run(sc.name, func(t *testing.T) {
			t.Parallel()
			d := deploy(t, sc)
			for id, r := range d.res {
				switch r.Type {
				case "AWS::Events::Rule":
					if e, ok := r.Properties["ScheduleExpression"]; ok {
						t.Errorf("%s runs on a schedule: %v", id, e)
					}
				case "AWS::Scheduler::Schedule", "AWS::Lambda::EventSourceMapping":
					t.Errorf("%s (%s) invokes a function while nothing arrives", id, r.Type)
				case "AWS::S3::Bucket":
					nc, _ := r.Properties["NotificationConfiguration"].(map[string]any)
					for k := range nc {
						if k != "EventBridgeConfiguration" {
							t.Errorf("%s notifies %s", id, k)
						}
					}
				}
			}
			for fn, want := range map[string]map[string][]string{
				"ProcessorFunction": d.processorInvokers(),
				"ArchiverFunction":  {"identity": {"SchedulerRole"}},
			} {
				if got := d.invokers(fn); canon(got) != canon(want) {
					t.Errorf("%s is invoked by %s, want %s", fn, canon(got), canon(want))
				}
			}
		})
	}
}

// processorInvokers is who may invoke the processor (invokers' shape).
func (d deployed) processorInvokers() map[string][]string {
	if d.economy() {
		return map[string][]string{"identity": {"SchedulerRole"}, "permission": {"ProcessorWakePermission"}, "rule": {"ProcessorWakeRule"}}
	}
	return map[string][]string{"identity": {"OperatorRole", "ReceiverRole", "SchedulerRole"}}
}

// invokers lists, by kind, what may invoke fn: the roles and managed
// policies that allow lambda:InvokeFunction (or a wider action) on it,
// the resource-based permissions on it, the EventBridge rules, schedules
// and event source mappings that target it, and its function URL.
func (d deployed) invokers(fn string) map[string][]string {
	out := map[string][]string{}
	name, _ := d.res[fn].Properties["FunctionName"].(string)
	add := func(kind, id string) {
		if !slices.Contains(out[kind], id) {
			out[kind] = append(out[kind], id)
			sort.Strings(out[kind])
		}
	}
	invokes := func(st map[string]any) bool {
		if st["Effect"] != "Allow" {
			return false
		}
		for _, a := range samtemplate.Strings(st["Action"]) {
			if a == "*" || a == "lambda:*" || strings.HasPrefix(a, "lambda:Invoke") {
				return slices.Contains(references(st["Resource"]), fn) || canon(st["Resource"]) == `"*"` || namesFunction(st["Resource"], name)
			}
		}
		return false
	}
	for id, r := range d.res {
		switch r.Type {
		case "AWS::IAM::Role":
			for _, st := range statements(r) {
				if invokes(st) {
					add("identity", id)
				}
			}
		case "AWS::IAM::ManagedPolicy":
			for _, st := range policyStatements(r.Properties["PolicyDocument"]) {
				if invokes(st) {
					add("identity", id)
				}
			}
		case "AWS::Lambda::Permission":
			if target(r.Properties["FunctionName"]) == fn {
				add("permission", id)
			}
		case "AWS::Events::Rule":
			targets, _ := r.Properties["Targets"].([]any)
			for _, tg := range targets {
				if target(tg.(map[string]any)["Arn"]) == fn {
					add("rule", id)
				}
			}
		case "AWS::Scheduler::Schedule":
			if tg, _ := r.Properties["Target"].(map[string]any); target(tg["Arn"]) == fn {
				add("schedule", id)
			}
		case "AWS::Lambda::EventSourceMapping", "AWS::Lambda::Url":
			if target(r.Properties["FunctionName"]) == fn || target(r.Properties["TargetFunctionArn"]) == fn {
				add(strings.TrimPrefix(r.Type, "AWS::Lambda::"), id)
			}
		}
	}
	return out
}

// TestMarkerWritersGoBeforeTheBucketIsEmptied: on delete, SourcesCopy's
// Delete empties the control bucket so that CloudFormation can delete it;
// whatever could write a marker afterwards would leave it non-empty and the
// delete DELETE_FAILED. So everything that writes markers (the receiver,
// the processor, the archiver, the acting operator function) and the
// schedule group (whose pending schedules start the processor) depends on
// SourcesCopy, and is deleted before it. The relay and the schedules' role
// name the processor and the archiver by the names those functions are
// given, without referring to them, or the dependency would be circular.
func TestMarkerWritersGoBeforeTheBucketIsEmptied(t *testing.T) {
	t.Parallel()
	for _, sc := range scenarios {
		t.Run(sc.name, func(t *testing.T) {
			t.Parallel()
			d := deploy(t, sc)
			for _, id := range []string{"ReceiverFunction", "ProcessorFunction", "ArchiverFunction", "OperatorFunction", "WakeScheduleGroup"} {
				if !d.dependsOn(id, "SourcesCopy") {
					t.Errorf("%s does not depend on SourcesCopy: CloudFormation may empty the control bucket before it is gone", id)
				}
			}
			if !d.dependsOn("SourcesCopy", "ControlBucket") {
				t.Error("SourcesCopy does not depend on ControlBucket")
			}
			for id, arn := range map[string]string{"ProcessorFunction": processorARN, "ArchiverFunction": archiverARN} {
				name := d.res[id].Properties["FunctionName"]
				if n, _ := name.(string); !strings.HasSuffix(arn, ":function:"+n) || n == "" {
					t.Errorf("%s is named %v, but the relay and the schedules invoke %s", id, name, arn)
				}
			}
		})
	}
}

// namesFunction reports whether a policy's resources name the function
// called name by its ARN (a function named in the template, so that a
// policy can name it without referring to it).
func namesFunction(resources any, name string) bool {
	if name == "" {
		return false
	}
	for _, r := range samtemplate.Strings(resources) {
		if strings.HasSuffix(r, ":function:"+name) || strings.HasSuffix(r, ":function:"+name+":*") {
			return true
		}
	}
	return false
}

// TestIdleRaisesNoAlarm: an idle stack writes no metric (nothing runs), so
// no alarm may take missing data for a breach, or every quiet hour would
// page someone. (BacklogAgeAlarm did, when a processor always polled.)
func TestIdleRaisesNoAlarm(t *testing.T) {
	t.Parallel()
	for _, sc := range scenarios {
		t.Run(sc.name, func(t *testing.T) {
			t.Parallel()
			d := deploy(t, sc)
			for id, r := range d.res {
				if r.Type != "AWS::CloudWatch::Alarm" {
					continue
				}
				switch m := r.Properties["TreatMissingData"]; m {
				case "notBreaching", "ignore":
				default:
					t.Errorf("%s treats missing data as %v: an idle stack would set it off", id, m)
				}
			}
		})
	}
}
