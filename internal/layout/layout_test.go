package layout_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"os"
	"os/exec"
	"strings"
	"testing"
)

const module = "github.com/webhook-inbox/webhook-inbox"

// pkg is what `go list -json` says of a package named on its command line.
type pkg struct {
	ImportPath string
	Deps       []string
	DepOnly    bool
	Standard   bool
}

// deps returns, for each package the patterns name, every package it links
// (go list -deps, so transitively), as the build with env (GOOS, GOARCH)
// and tags would link them.
func deps(t *testing.T, env []string, tags string, patterns ...string) map[string][]string {
	t.Helper()
	gobin, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go command: cannot read the dependency graph")
	}
	args := []string{"list", "-deps", "-json=ImportPath,Deps,DepOnly,Standard"}
	if tags != "" {
		args = append(args, "-tags", tags)
	}
	cmd := exec.Command(gobin, append(args, patterns...)...)
	cmd.Env = append(os.Environ(), env...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go %s: %v\n%s", strings.Join(args, " "), err, stderr.String())
	}
	res := map[string][]string{}
	dec := json.NewDecoder(bytes.NewReader(out))
	for {
		var p pkg
		if err := dec.Decode(&p); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			t.Fatal(err)
		}
		if !p.DepOnly {
			res[p.ImportPath] = p.Deps
		}
	}
	if len(res) == 0 {
		t.Fatalf("go list named no package for %v", patterns)
	}
	return res
}

// forbidden returns the dependencies of deps that match any rule: a
// prefix, or a path containing the rule when it starts with "/".
func forbidden(deps []string, rules ...string) []string {
	var bad []string
	for _, d := range deps {
		for _, r := range rules {
			if d == r || strings.HasPrefix(d, r+"/") || (strings.HasPrefix(r, "/") && strings.Contains(d, r)) {
				bad = append(bad, d)
				break
			}
		}
	}
	return bad
}

// lambdaBuild is the Lambda binaries' build (Makefile LAMBDA_ENV and
// LAMBDA_FLAGS): what the graph of a deployed function is.
var lambdaBuild = []string{"GOOS=linux", "GOARCH=arm64", "CGO_ENABLED=0"}

// TestLambdasLinkNoToolingNorTests: a Lambda binary carries only the
// Lambdas' code: nothing under internal/ (dev stack, test kits), no test
// helper, not the testing package.
func TestLambdasLinkNoToolingNorTests(t *testing.T) {
	t.Parallel()
	got := deps(t, lambdaBuild, "lambda.norpc", module+"/functions/...")
	if len(got) != 6 {
		t.Fatalf("want the six functions (receiver, processor, archiver, migrator, operator, relay), got %d: %v", len(got), got)
	}
	for fn, ds := range got {
		if bad := forbidden(ds, module+"/internal", "testing", "/test/", "/testkit", "/pgtest", "/s3test"); len(bad) > 0 {
			t.Errorf("%s links %v", fn, bad)
		}
	}
}

// TestReceiverLinksOnlyTheReceiver: the receiver's cold start and size do
// not pay for the processor, the archive or the migrations. (It links the
// S3 client: it reads its sources from the relay's copy and writes the
// wake-up markers, shared/wake.)
func TestReceiverLinksOnlyTheReceiver(t *testing.T) {
	t.Parallel()
	fn := module + "/functions/receiver"
	ds := deps(t, lambdaBuild, "lambda.norpc", fn)[fn]
	if bad := forbidden(ds, module+"/shared/processor", module+"/shared/archive", "github.com/pressly/goose"); len(bad) > 0 {
		t.Errorf("the receiver links %v", bad)
	}
}

// TestOnlyTheMigratorLinksTheMigrations: the schema changes in one place,
// the migration function; the functions that serve neither link the
// migrations nor goose (their database roles could not run them anyway).
func TestOnlyTheMigratorLinksTheMigrations(t *testing.T) {
	t.Parallel()
	got := deps(t, lambdaBuild, "lambda.norpc", module+"/functions/...")
	for fn, ds := range got {
		bad := forbidden(ds, "github.com/pressly/goose", module+"/shared/storage/migrate", module+"/shared/dbschema")
		switch fn {
		case module + "/functions/migrator":
			if len(bad) == 0 {
				t.Errorf("the migrator links no migrations: %v", ds)
			}
		default:
			if len(bad) > 0 {
				t.Errorf("%s links %v", fn, bad)
			}
		}
	}
}

// TestRelayLinksNoDatabase: the relay runs outside the VPC, where no
// database is reachable; it links neither the database driver nor the
// storage, the processor or the migrations.
func TestRelayLinksNoDatabase(t *testing.T) {
	t.Parallel()
	fn := module + "/functions/relay"
	ds := deps(t, lambdaBuild, "lambda.norpc", fn)[fn]
	if bad := forbidden(ds, "github.com/jackc/pgx", "github.com/pressly/goose", module+"/shared/storage", module+"/shared/processor",
		module+"/shared/secrets", module+"/shared/dbschema"); len(bad) > 0 {
		t.Errorf("the relay links %v", bad)
	}
}

// TestSettingsIsALeaf: settings links the standard library only, so any
// package may read its configuration with it.
func TestSettingsIsALeaf(t *testing.T) {
	t.Parallel()
	p := module + "/shared/settings"
	for _, d := range deps(t, nil, "", p)[p] {
		if strings.Contains(strings.SplitN(d, "/", 2)[0], ".") {
			t.Errorf("settings links %s, which is not the standard library", d)
		}
	}
}

// TestOperatorCLILinksNoDevStack: webhookctl is the operator's tool; the
// dev stack's servers, emulator and template reader stay out of it, and so
// do the stand-in for IAM and the local operator API (development only:
// webhookctl signs its requests, it never verifies them) and the browser
// driver of the console's tests.
func TestOperatorCLILinksNoDevStack(t *testing.T) {
	t.Parallel()
	cli := module + "/cmd/webhookctl"
	ds := deps(t, nil, "", cli)[cli]
	dev := module + "/internal/devstack"
	bad := forbidden(ds, dev+"/localpg", dev+"/locals3", dev+"/lambdalocal", dev+"/samtemplate", dev+"/iamlocal", dev+"/operatorlocal",
		"github.com/awslabs/goformation", "github.com/chromedp")
	for _, d := range ds {
		if d == dev {
			bad = append(bad, d)
		}
	}
	if len(bad) > 0 {
		t.Errorf("webhookctl links %v", bad)
	}
}
