package migrator_test

import (
	"strings"
	"testing"
	"time"

	"github.com/webhook-inbox/webhook-inbox/shared/migrator"
)

// The migration function must not trust its caller: a forged Update
// with Auth=iam, sent by anyone who may invoke it, set the roles up for
// IAM and cleared their passwords. The roles' authentication is the
// function's own (MIGRATOR_ROLES_AUTH): the forged Update fails and the
// passwords stay.
func TestForgedIAMUpdateKeepsThePasswords(t *testing.T) {
	t.Parallel()
	f := setup(t)
	if _, err := f.handle(f.request(migrator.RequestCreate, passwordProps("1")), time.Minute); err != nil {
		t.Fatal(err)
	}
	hasPassword := func() bool {
		var ok bool
		if err := f.pool.QueryRow(t.Context(), `SELECT rolpassword IS NOT NULL FROM pg_authid WHERE rolname = 'webhook_receiver'`).Scan(&ok); err != nil {
			t.Fatal(err)
		}
		return ok
	}
	if !hasPassword() {
		t.Fatal("Create in password mode left the receiver without a password")
	}
	forged := passwordProps("2")
	forged["Auth"] = "iam"
	resp, err := f.handle(f.request(migrator.RequestUpdate, forged), time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if resp.Status != migrator.StatusFailed || !strings.Contains(resp.Reason, `property Auth is "iam", but the migration function's MIGRATOR_ROLES_AUTH is "password"`) {
		t.Fatalf("forged Update answered %s %q", resp.Status, resp.Reason)
	}
	if !hasPassword() {
		t.Fatal("the forged Update cleared the receiver's password")
	}
}

// The answer goes only to CloudFormation's pre-signed S3 URL. A
// request naming plain HTTP, or another https host, is refused before
// anything is done, and nothing is PUT to it; a loopback URL is answered
// only when the function's own setting allows it (the local stack's).
func TestResponseURLMustBeCloudFormations(t *testing.T) {
	t.Parallel()
	f := setup(t)
	strict := migrator.Failing(nil, nil, false) // no loopback
	for name, u := range map[string]string{
		"plain http loopback": f.resp.url(),
		"https loopback":      strings.Replace(f.resp.url(), "http://", "https://", 1),
		"another https host":  "https://attacker.example/cloudformation-custom-resource-response-euwest1/x?X-Amz-Signature=1",
		"http S3":             "http://cloudformation-custom-resource-response-euwest1.s3.eu-west-1.amazonaws.com/x",
		"an API on AWS":       "https://abcs3defgh.execute-api.eu-west-1.amazonaws.com/x",
		"another bucket":      "https://s3.eu-west-1.amazonaws.com/attacker-bucket/x",
	} {
		req := f.request(migrator.RequestDelete, passwordProps("1"))
		req.ResponseURL = u
		if _, err := strict.Handle(t.Context(), req); err == nil || !strings.Contains(err.Error(), "refused, nothing done") {
			t.Errorf("%s: %v, want a refusal", name, err)
		}
	}
	if n := f.resp.count(); n != 0 {
		t.Fatalf("%d answers were PUT to a refused URL", n)
	}
	// Create too: nothing is migrated for a refused URL.
	req := f.request(migrator.RequestCreate, passwordProps("1"))
	if _, err := strict.Handle(t.Context(), req); err == nil || f.rolesExist(false) || f.resp.count() != 0 {
		t.Fatalf("Create with a loopback URL and no local setting: %v, applied %v, answers %d", err, f.rolesExist(false), f.resp.count())
	}
}
