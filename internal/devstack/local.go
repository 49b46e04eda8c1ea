package devstack

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/webhook-inbox/webhook-inbox/internal/devenv"
	"github.com/webhook-inbox/webhook-inbox/internal/devstack/devtools"
	"github.com/webhook-inbox/webhook-inbox/internal/devstack/iamlocal"
	"github.com/webhook-inbox/webhook-inbox/internal/devstack/lambdalocal"
	"github.com/webhook-inbox/webhook-inbox/internal/devstack/locals3"
	"github.com/webhook-inbox/webhook-inbox/internal/devstack/operatorlocal"
	"github.com/webhook-inbox/webhook-inbox/internal/devstack/samtemplate"
	"github.com/webhook-inbox/webhook-inbox/shared/blobstore"
	"github.com/webhook-inbox/webhook-inbox/shared/settings"
	"github.com/webhook-inbox/webhook-inbox/shared/source"
	"github.com/webhook-inbox/webhook-inbox/shared/storage"
)

// LocalOptions are `webhookdev local`'s flags.
type LocalOptions struct {
	Addr, DataDir, S3Dir string
	// ArchiveAge is the archiver's ARCHIVE_MIN_AGE.
	ArchiveAge time.Duration
	// Every fires each schedule at least this often (0: the template's
	// rates).
	Every time.Duration
}

// RunLocal is sam local without Docker: it builds the bootstrap binaries
// with the Makefile targets sam build calls, runs the migration function
// first as CloudFormation would (the schema and the functions' roles, each
// with a password from a local stand-in of its secret), then each function
// under the Lambda Runtime Interface Emulator connected as its own role,
// serves the template's HTTP API routes on o.Addr and fires the template's
// schedules, on the dev stack's Postgres and S3, until ctx is done.
func RunLocal(ctx context.Context, out io.Writer, o LocalOptions) error {
	root, err := devtools.RepoRoot()
	if err != nil {
		return err
	}
	tpl, err := samtemplate.Open(filepath.Join(root, "template.yaml"), map[string]any{
		// The required parameter; locally the functions get a file instead.
		"SourcesSecretArn": "arn:aws:secretsmanager:us-east-1:000000000000:secret:local",
	})
	if err != nil {
		return err
	}
	url := os.Getenv(storage.EnvDatabaseURL)
	if url == "" {
		var stop func()
		if url, stop, err = StartDatabase(ctx, out, o.DataDir); err != nil {
			return err
		}
		defer stop()
	}
	s3, err := locals3.Start(ctx, locals3.Options{Dir: o.S3Dir})
	if err != nil {
		return err
	}
	defer s3.Close()
	blobs, err := blobstore.Open(ctx, s3.BlobConfig(Bucket))
	if err != nil {
		return err
	}
	if err := blobs.CreateBucket(ctx); err != nil {
		return err
	}
	sourcesFile := os.Getenv(source.EnvSourcesFile)
	if sourcesFile == "" {
		sourcesFile = filepath.Join(root, devenv.SourcesFile)
	}
	if sourcesFile, err = filepath.Abs(sourcesFile); err != nil {
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
	archiveEnv := []string{
		"ARCHIVE_BUCKET=" + Bucket, "ARCHIVE_MIN_AGE=" + o.ArchiveAge.String(),
		"S3_ENDPOINT=" + s3.Endpoint(), "S3_ACCESS_KEY_ID=" + locals3.AccessKeyID,
		"S3_SECRET_ACCESS_KEY=" + locals3.SecretAccessKey, "AWS_REGION=" + locals3.Region,
	}
	fmt.Fprintln(out, "lambda: building the bootstraps (make build-<Function>), running the migration function, starting the runtime emulators ...")
	dir := filepath.Join(root, ".local", "lambda")
	stack, err := lambdalocal.StartStack(ctx, lambdalocal.StackOptions{
		Template: tpl, RepoRoot: root, Dir: dir, DatabaseURL: url,
		Env: map[string][]string{
			"*":                    {"LOG_LEVEL=info"},
			"ReceiverFunction":     {"WEBHOOK_SOURCES_FILE=" + sourcesFile},
			"ArchiverFunction":     archiveEnv,
			"OperatorFunction":     archiveEnv,
			"OperatorReadFunction": archiveEnv,
		},
		IAM: verifier, URLTargets: map[string]string{"OperatorFunction": operatorlocal.TargetAct, "OperatorReadFunction": operatorlocal.TargetRead},
		Logger: settings.Logger(0),
	})
	if err != nil {
		return err
	}
	defer stack.Close()
	if r, err := stack.Schema.Response(); err == nil {
		fmt.Fprintf(out, "schema: %s (the migration function's answer to Create; its output: %s)\n", r["Reason"], stack.Migrator.LogPath())
	}
	ids := make([]string, 0, len(stack.Functions))
	for id := range stack.Functions {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	for _, id := range ids {
		fmt.Fprintf(out, "lambda: %s running; its output: %s\n", id, stack.Functions[id].LogPath())
	}
	ln, err := net.Listen("tcp", o.Addr)
	if err != nil {
		return fmt.Errorf("listen on %s: %w", o.Addr, err)
	}
	base := "http://" + ln.Addr().String()
	fmt.Fprintf(out, "api: %s/webhooks/{source} -> ReceiverFunction\n", base)
	sources, _, err := devenv.Sources(os.Getenv)
	if err == nil {
		PrintSamples(out, sources, base)
	}
	// Each function URL on a loopback port of its own, as Lambda serves
	// each on its own domain.
	urls := map[string]string{}
	for _, id := range []string{"OperatorFunction", "OperatorReadFunction"} {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return err
		}
		srv := &http.Server{Handler: stack.URLs[id], ReadHeaderTimeout: 10 * time.Second}
		go func() { _ = srv.Serve(l) }()
		defer srv.Close()
		urls[id] = "http://" + l.Addr().String()
	}
	fmt.Fprintf(out, "function URLs: %s -> OperatorFunction, %s -> OperatorReadFunction (AWS_IAM, stood in for); as the acting operator:\n", urls["OperatorFunction"], urls["OperatorReadFunction"])
	fmt.Fprintf(out, "  env %s AWS_REGION=%s go run ./cmd/webhookctl --operator-url %s --operator-read-url %s stats\n",
		strings.Join(operator.Env(), " "), operatorlocal.Region, urls["OperatorFunction"], urls["OperatorReadFunction"])
	fmt.Fprintln(out, "Ctrl-C stops everything.")
	go func() { _ = stack.RunSchedules(ctx, o.Every, settings.Logger(0)) }()
	err = stack.Serve(ctx, ln)
	for id, d := range stack.InitDurations() {
		fmt.Fprintf(out, "lambda: %s init duration %v\n", id, d)
	}
	return err
}
