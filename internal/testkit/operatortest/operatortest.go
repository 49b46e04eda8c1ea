// Package operatortest serves the operator API for a test as a deployed
// stack serves it (two URLs, read-only and acting, behind a stand-in for
// Lambda's IAM check; internal/devstack/operatorlocal) and returns the
// client webhookctl and the console use against a stack, signing with
// SigV4 as a local identity: the remote backend of their tests.
package operatortest

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/aws/aws-sdk-go-v2/credentials"

	"github.com/webhook-inbox/webhook-inbox/internal/devstack/iamlocal"
	"github.com/webhook-inbox/webhook-inbox/internal/devstack/operatorlocal"
	"github.com/webhook-inbox/webhook-inbox/internal/operatorclient"
	"github.com/webhook-inbox/webhook-inbox/shared/archive"
	"github.com/webhook-inbox/webhook-inbox/shared/blobstore"
	"github.com/webhook-inbox/webhook-inbox/shared/source"
	"github.com/webhook-inbox/webhook-inbox/shared/storage"
)

// Remote is the operator API served for one test.
type Remote struct {
	// ReadURL and ActURL are the two function URLs' stand-ins.
	ReadURL, ActURL string
	// Operator may read and act; Viewer may only read.
	Operator, Viewer iamlocal.Identity
}

// Start serves the operator API over store (and the archive, with its
// bucket blobs, when arch is set) until the test ends.
func Start(t testing.TB, store *storage.Store, arch *archive.Config, blobs *blobstore.Store) *Remote {
	t.Helper()
	return StartWithSources(t, store, arch, blobs, nil)
}

// StartWithSources is Start whose re-ingests verify with the sources
// sources reads (nil: re-ingests are refused, as where none are given).
func StartWithSources(t testing.TB, store *storage.Store, arch *archive.Config, blobs *blobstore.Store, sources func(context.Context) (*source.Set, error)) *Remote {
	t.Helper()
	e, err := operatorlocal.New(operatorlocal.Config{Store: store, Archive: arch, Blobs: blobs, Sources: sources})
	if err != nil {
		t.Fatalf("operatortest: %v", err)
	}
	read, act := httptest.NewServer(e.Read), httptest.NewServer(e.Act)
	t.Cleanup(read.Close)
	t.Cleanup(act.Close)
	return &Remote{ReadURL: read.URL, ActURL: act.URL, Operator: e.Operator, Viewer: e.Viewer}
}

// Client is the client of the operator API, signing as id.
func (r *Remote) Client(t testing.TB, id iamlocal.Identity) *operatorclient.Client {
	t.Helper()
	creds := credentials.NewStaticCredentialsProvider(id.AccessKeyID, id.SecretAccessKey, id.SessionToken)
	tr, err := operatorclient.NewTransport(creds, operatorlocal.Region, nil)
	if err != nil {
		t.Fatalf("operatortest: %v", err)
	}
	c, err := operatorclient.New(operatorclient.Config{ReadURL: r.ReadURL, ActURL: r.ActURL, HTTP: &http.Client{Transport: tr}})
	if err != nil {
		t.Fatalf("operatortest: %v", err)
	}
	return c
}

// Env is what a command needs to reach the API as id: its URLs and
// credentials, as webhookctl reads them.
func (r *Remote) Env(id iamlocal.Identity) map[string]string {
	env := map[string]string{
		"WEBHOOKCTL_OPERATOR_URL": r.ActURL, "WEBHOOKCTL_OPERATOR_READ_URL": r.ReadURL, "AWS_REGION": operatorlocal.Region,
		"AWS_ACCESS_KEY_ID": id.AccessKeyID, "AWS_SECRET_ACCESS_KEY": id.SecretAccessKey, "AWS_SESSION_TOKEN": id.SessionToken,
	}
	return env
}
