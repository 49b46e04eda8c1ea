// Package invoketest gives tests the Lambda Invoke stand-in of
// internal/devstack/localinvoke, which the real aws-sdk-go-v2 Lambda client
// talks to over HTTP, so that code under test starts other functions
// through its production path, SDK, signing and HTTP included.
//
// As with secretstest, the SDK finds the stand-in through the process's
// variables (AWS_ENDPOINT_URL_LAMBDA and fake keys), so one stand-in serves
// the whole test process: Use, from TestMain, starts it and sets them.
// Tests run in parallel, each registering functions of its own under
// unique names (Function).
//
//	func TestMain(m *testing.M) { invoketest.Use(); pgtest.Main(m) }
//
// Only _test.go files should import it.
package invoketest

import (
	"crypto/rand"
	"encoding/hex"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/webhook-inbox/webhook-inbox/internal/devstack/localinvoke"
)

var (
	shared   *localinvoke.Server
	sharedMu sync.Mutex
)

// Use starts the process's stand-in and points the AWS SDK's Lambda client
// at it through the process environment, with fake keys and none of the
// machine's AWS configuration. Call it from TestMain before m.Run.
func Use() {
	sharedMu.Lock()
	defer sharedMu.Unlock()
	if shared != nil {
		return
	}
	srv, err := localinvoke.Start(localinvoke.Options{})
	if err != nil {
		panic(err)
	}
	shared = srv
	for k, v := range map[string]string{
		"AWS_ENDPOINT_URL_LAMBDA":     srv.Endpoint(),
		"AWS_ACCESS_KEY_ID":           localinvoke.AccessKeyID,
		"AWS_SECRET_ACCESS_KEY":       localinvoke.SecretAccessKey,
		"AWS_REGION":                  "us-east-1",
		"AWS_EC2_METADATA_DISABLED":   "true",
		"AWS_CONFIG_FILE":             filepath.Join(os.TempDir(), "invoketest-no-such-config"),
		"AWS_SHARED_CREDENTIALS_FILE": filepath.Join(os.TempDir(), "invoketest-no-such-credentials"),
	} {
		os.Setenv(k, v)
	}
	for _, k := range []string{"AWS_SESSION_TOKEN", "AWS_PROFILE", "AWS_DEFAULT_PROFILE", "AWS_ENDPOINT_URL"} {
		os.Unsetenv(k)
	}
}

// Shared returns the stand-in Use started, failing t when TestMain did not
// call Use.
func Shared(t testing.TB) *localinvoke.Server {
	t.Helper()
	sharedMu.Lock()
	defer sharedMu.Unlock()
	if shared == nil {
		t.Fatal("invoketest: call invoketest.Use() from TestMain, which points the AWS SDK at the stand-in")
	}
	return shared
}

// Function registers fn under a new unique name, which it returns.
func Function(t testing.TB, prefix string, fn localinvoke.Function) string {
	t.Helper()
	var b [4]byte
	_, _ = rand.Read(b[:])
	name := prefix + "-" + hex.EncodeToString(b[:])
	Shared(t).Register(name, fn)
	return name
}
