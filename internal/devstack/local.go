package devstack

import (
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/webhook-inbox/webhook-inbox/internal/checkout"
	"github.com/webhook-inbox/webhook-inbox/internal/devstack/iamlocal"
	"github.com/webhook-inbox/webhook-inbox/internal/devstack/lambdalocal"
	"github.com/webhook-inbox/webhook-inbox/internal/devstack/locals3"
	"github.com/webhook-inbox/webhook-inbox/internal/devstack/operatorlocal"
	"github.com/webhook-inbox/webhook-inbox/internal/devstack/pinnedtools"
	"github.com/webhook-inbox/webhook-inbox/internal/devstack/samtemplate"
	"github.com/webhook-inbox/webhook-inbox/shared/settings"
	"github.com/webhook-inbox/webhook-inbox/shared/source"
	"github.com/webhook-inbox/webhook-inbox/shared/storage"
	"github.com/webhook-inbox/webhook-inbox/shared/wake"
)

// LocalOptions are `webhookdev local`'s flags.
type LocalOptions struct {
	Addr, DataDir, S3Dir string
	// ArchiveAge is the archiver's ARCHIVE_MIN_AGE.
	ArchiveAge time.Duration
	// Profile is the template's Profile parameter: which way the receiver
	// wakes the processor (an invoke; economy: a marker and EventBridge).
	Profile string
	// FireEvery is how often the local EventBridge Scheduler fires the
	// wake-up schedules that are due.
	FireEvery time.Duration
	// LambdaDir receives the bootstraps and the functions' output; empty,
	// .local/lambda in the repository.
	LambdaDir string
	// Getenv reads DATABASE_URL and the sources' variables; nil is
	// os.Getenv.
	Getenv func(string) string
}

// RunLocal is sam local without Docker, wired as the stack is deployed: it
// builds the bootstrap binaries with the Makefile targets sam build calls,
// creates the template's custom resources as CloudFormation would (the
// relay copies the sources document to the control bucket; the migration
// front has the migration function apply the schema and the functions'
// roles, each with a password from a local stand-in of its secret), runs
// each function under the Lambda Runtime Interface Emulator connected as
// its own role, serves the template's HTTP API routes on o.Addr, and
// wakes the functions as the deployed stack does, through local stand-ins
// of the Lambda Invoke API, EventBridge (fed by the local S3's
// notifications) and EventBridge Scheduler, on the dev stack's Postgres
// and S3 folder, until ctx is done. Nothing runs on a clock.
func RunLocal(ctx context.Context, out io.Writer, o LocalOptions) error {
	root, err := pinnedtools.RepoRoot()
	if err != nil {
		return err
	}
	getenv := o.Getenv
	if getenv == nil {
		getenv = os.Getenv
	}
	// Without either sources variable, the dev stack's sources, wherever
	// the command runs from.
	given := getenv
	getenv = func(k string) string {
		if k == source.EnvSourcesFile && given(k) == "" && given(source.EnvSources) == "" {
			return filepath.Join(root, checkout.SourcesFile)
		}
		return given(k)
	}
	tpl, err := samtemplate.Open(filepath.Join(root, "template.yaml"), map[string]any{
		"Profile": o.Profile,
		// The local Secrets Manager holds the sources document under it.
		"SourcesSecretArn": "arn:aws:secretsmanager:us-east-1:123456789012:secret:webhook-inbox-local-sources-AbCdEf",
	})
	if err != nil {
		return err
	}
	url := getenv(storage.EnvDatabaseURL)
	if url == "" {
		var stop func()
		if url, stop, err = StartDatabase(ctx, out, o.DataDir); err != nil {
			return err
		}
		defer stop()
	}
	doc, err := sourcesDocument(getenv)
	if err != nil {
		return err
	}
	// The operator function's two URLs admit two local principals, as
	// the stack's two policies would (operatorlocal's targets).
	operator, err := iamlocal.NewIdentity("operator", operatorlocal.TargetRead, operatorlocal.TargetAct)
	if err != nil {
		return err
	}
	viewer, err := iamlocal.NewIdentity("viewer", operatorlocal.TargetRead)
	if err != nil {
		return err
	}
	verifier, err := iamlocal.NewVerifier(operatorlocal.Region, operator, viewer)
	if err != nil {
		return err
	}
	archiveAge := []string{"ARCHIVE_MIN_AGE=" + o.ArchiveAge.String()}
	fmt.Fprintf(out, "lambda: building the bootstraps (make build-<Function>), deploying template.yaml (Profile=%s) on local services, starting the runtime emulators ...\n", o.Profile)
	dir := o.LambdaDir
	if dir == "" {
		dir = filepath.Join(root, ".local", "lambda")
	}
	stack, err := lambdalocal.StartStack(ctx, lambdalocal.StackOptions{
		Template: tpl, RepoRoot: root, Dir: dir, DatabaseURL: url, Sources: doc,
		// Buckets of its own in make dev's folder: the template versions
		// the archive, which make dev's bucket is not.
		S3: locals3.Options{Dir: o.S3Dir}, FireEvery: o.FireEvery,
		Env: map[string][]string{
			"*":                    {"LOG_LEVEL=info"},
			"ProcessorFunction":    archiveAge,
			"ArchiverFunction":     archiveAge,
			"OperatorFunction":     archiveAge,
			"OperatorReadFunction": archiveAge,
		},
		IAM: verifier, URLTargets: map[string]string{"OperatorFunction": operatorlocal.TargetAct, "OperatorReadFunction": operatorlocal.TargetRead},
		Logger: settings.Logger(0),
	})
	if err != nil {
		return err
	}
	defer stack.Close()
	for _, id := range []string{"SourcesCopy", lambdalocal.SchemaResourceID} {
		if r, err := stack.Created[id].Response(); err == nil {
			fmt.Fprintf(out, "%s: %s\n", id, r["Reason"])
		}
	}
	for _, id := range stack.FunctionIDs() {
		fmt.Fprintf(out, "lambda: %s running; its output: %s\n", id, stack.Functions[id].LogPath())
	}
	ln, err := net.Listen("tcp", o.Addr)
	if err != nil {
		return fmt.Errorf("listen on %s: %w", o.Addr, err)
	}
	base := "http://" + ln.Addr().String()
	fmt.Fprintf(out, "api: %s/webhooks/{source} -> ReceiverFunction\n", base)
	if sources, _, err := checkout.Sources(getenv); err == nil {
		PrintSamples(out, sources, base, false)
	}
	// Each function URL on a loopback port of its own, as Lambda serves
	// each on its own domain.
	urls := map[string]string{}
	for _, id := range []string{"OperatorFunction", "OperatorReadFunction"} {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return err
		}
		srv := NewServer(stack.URLs[id], Timeouts{})
		go func() { _ = srv.Serve(l) }()
		defer srv.Close()
		urls[id] = "http://" + l.Addr().String()
	}
	fmt.Fprintf(out, "function URLs: %s -> OperatorFunction, %s -> OperatorReadFunction (AWS_IAM, stood in for); as the acting operator:\n", urls["OperatorFunction"], urls["OperatorReadFunction"])
	fmt.Fprintf(out, "  env %s AWS_REGION=%s go run ./cmd/webhookctl --operator-url %s --operator-read-url %s stats\n",
		strings.Join(operator.Env(), " "), operatorlocal.Region, urls["OperatorFunction"], urls["OperatorReadFunction"])
	PrintWiring(out, stack, o.FireEvery)
	fmt.Fprintln(out, "Ctrl-C stops everything.")
	err = stack.Serve(ctx, ln)
	for id, d := range stack.InitDurations() {
		fmt.Fprintf(out, "lambda: %s init duration %v\n", id, d)
	}
	return err
}

// PrintWiring says how the local stack wakes its functions: the path the
// deployed stack's profile takes, through the local services.
func PrintWiring(out io.Writer, stack *lambdalocal.Stack, fireEvery time.Duration) {
	control := stack.Buckets["ControlBucket"].Bucket
	fmt.Fprintf(out, "s3: %s (access key %s): archive %q, control %q (notifications to the local EventBridge %s)\n",
		stack.S3.Endpoint(), locals3.AccessKeyID, stack.Buckets["ArchiveBucket"].Bucket, control, stack.Events.NotificationURL())
	if stack.Getenv("ReceiverFunction", wake.EnvMode) == string(wake.ModeInvoke) {
		fmt.Fprintf(out, "wake: ReceiverFunction -> ProcessorFunction after each stored webhook, by an asynchronous invoke (local Lambda API %s)\n", stack.Invoke.Endpoint())
	} else {
		fmt.Fprintf(out, "wake: ReceiverFunction -> an empty wake/now/ object in %q -> local EventBridge rule -> ProcessorFunction, after each stored webhook\n", control)
	}
	fmt.Fprintf(out, "wake: later wake-ups (retries, the sweep, the archiver) -> wake/arm/ objects in %q -> local EventBridge -> RelayFunction -> one-time schedules in the local EventBridge Scheduler %s, fired when due (checked every %v)\n",
		control, stack.Scheduler.Endpoint(), fireEvery)
}

// sourcesDocument is the sources document the relay copies for the
// receiver: WEBHOOK_SOURCES, or WEBHOOK_SOURCES_FILE's.
func sourcesDocument(getenv func(string) string) ([]byte, error) {
	if v := getenv(source.EnvSources); v != "" {
		return []byte(v), nil
	}
	return os.ReadFile(getenv(source.EnvSourcesFile))
}
