package main

import (
	"os"
	"os/user"
	"strings"
	"testing"

	"github.com/webhook-inbox/webhook-inbox/internal/testkit/field"
	"github.com/webhook-inbox/webhook-inbox/shared/operations"
)

// TestWhoami: whoami says who actions are recorded as (declared here:
// $WEBHOOKCTL_ACTOR, else user@host; never verified), that this backend
// acts, and the database role the statements run as, the one the action
// records keep.
func TestWhoami(t *testing.T) {
	t.Parallel()
	f := newOpsFixture(t)
	var role string
	if err := f.pool.QueryRow(f.ctx, `SELECT current_user`).Scan(&role); err != nil {
		t.Fatal(err)
	}

	f.env[EnvActor] = "ci-job-42"
	var id operations.Identity
	f.runJSON(&id, "whoami")
	if !field.Check(t, "whoami",
		field.Eq("Operator", id.Operator, "ci-job-42"),
		field.Eq("Verified", id.Verified, false),
		field.Eq("Access", id.Access, operations.AccessAct),
		field.Eq("DatabaseRole", id.DatabaseRole, role),
	) {
		t.FailNow()
	}
	human := f.runOK("whoami")
	for _, want := range []string{"operator", "ci-job-42", "not verified", "access", "act", "database role", role} {
		if !strings.Contains(human, want) {
			t.Errorf("whoami lacks %q:\n%s", want, human)
		}
	}

	delete(f.env, EnvActor)
	me := "unknown"
	if u, err := user.Current(); err == nil && u.Username != "" {
		me = u.Username
	}
	host, _ := os.Hostname()
	f.runJSON(&id, "whoami")
	if id.Operator != me+"@"+host {
		t.Fatalf("whoami without %s = %+v, want %s@%s", EnvActor, id, me, host)
	}

	// An acting command records the same name and role.
	f.populate()
	f.runOK("dead-letters", "requeue", "--all", "--yes")
	var acts operations.ActionPage
	f.runJSON(&acts, "actions")
	if len(acts.Actions) != 1 || acts.Actions[0].Actor != id.Operator || acts.Actions[0].DBUser != id.DatabaseRole {
		t.Fatalf("actions = %+v, whoami said %+v", acts.Actions, id)
	}

	// A name with control characters reaches the terminal escaped.
	f.env[EnvActor] = "eve\x1b[2J"
	if out := f.runOK("whoami"); strings.Contains(out, "\x1b") || !strings.Contains(out, `eve\u001b[2J`) {
		t.Fatalf("whoami printed %q", out)
	}
}
