package dbschema_test

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/webhook-inbox/webhook-inbox/internal/sender"
	"github.com/webhook-inbox/webhook-inbox/internal/testkit/factory"
	"github.com/webhook-inbox/webhook-inbox/internal/testkit/pgtest"
	"github.com/webhook-inbox/webhook-inbox/shared/inbox"
	"github.com/webhook-inbox/webhook-inbox/shared/operations"
	"github.com/webhook-inbox/webhook-inbox/shared/source"
	"github.com/webhook-inbox/webhook-inbox/shared/storage"
	"github.com/webhook-inbox/webhook-inbox/shared/storage/migrate"
)

// The quarantine's operator statements as the operator function's roles:
// webhook_operator reads, re-ingests (the receiver's insert, the marks and
// deletes, the record) and purges, and finds and erases an event's copies;
// webhook_operator_read reads and is refused every change.
func TestOperatorQuarantineRunsAsItsRole(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	owner := pgtest.Pool(t)
	seed := storage.New(owner)
	doc := `{"sources": {"github": {"kind": "github", "secrets": ["gh-secret-role-0123456789ab"]}}}`
	set, err := source.Parse([]byte(doc))
	if err != nil {
		t.Fatal(err)
	}
	gh, _ := set.Lookup("github")
	at := time.Now().Add(-time.Hour)
	body := []byte(`{"action":"opened","issue":{"id":7}}`)
	sr, err := sender.SignEvent(gh, body, "role-q-1", "issues", at)
	if err != nil {
		t.Fatal(err)
	}
	verifies := factory.Quarantined(ctx, t, seed, &factory.QuarantinedOpts{Source: "github", Kind: "github", Header: sr.Header, Body: body, ReceivedAt: at})
	factory.Quarantined(ctx, t, seed, &factory.QuarantinedOpts{Source: "github", Kind: "github", Header: http.Header{"X-Hub-Signature-256": {"sha256=00"}}, Body: []byte(`{"forged":1}`)})
	sources := func(context.Context) (*source.Set, error) { return set, nil }
	as := func(role string, access operations.Access) *operations.Service {
		svc, err := operations.New(operations.Config{Access: access}, operations.Deps{Store: storage.New(pgtest.As(t, owner, role)), Sources: sources})
		if err != nil {
			t.Fatal(err)
		}
		return svc
	}
	octx := operations.WithOperator(ctx, operations.Operator{Name: "ops@test"})

	read := as(migrate.RoleOperatorRead, operations.AccessRead)
	if p, err := read.Quarantine(octx, operations.QuarantineQuery{}); err != nil || len(p.Deliveries) != 2 {
		t.Fatalf("list as %s: %+v, %v", migrate.RoleOperatorRead, p, err)
	}
	if d, err := read.QuarantinedDelivery(octx, verifies); err != nil || string(d.Body) != string(body) {
		t.Fatalf("show as %s: %+v, %v", migrate.RoleOperatorRead, d, err)
	}
	// The read role's own refusal, past the Service's access check.
	asRead := storage.New(pgtest.As(t, owner, migrate.RoleOperatorRead))
	if _, err := asRead.QuarantinePurge(ctx, storage.QuarantineFilter{Source: "github"}); !insufficientPrivilege(err) {
		t.Errorf("purge as %s: %v; want SQLSTATE 42501", migrate.RoleOperatorRead, err)
	}
	if _, err := asRead.EventInsert(ctx, storage.EventInsertParams{Source: "github", SourceKind: "github", EventID: "x", Body: body}); !insufficientPrivilege(err) {
		t.Errorf("insert as %s: %v; want SQLSTATE 42501", migrate.RoleOperatorRead, err)
	}

	act := as(migrate.RoleOperator, operations.AccessAct)
	res, err := act.Reingest(octx, operations.ReingestRequest{Select: operations.QuarantineSelection{Source: "github"}, Expect: new(2)})
	if err != nil || res.Stored != 1 || res.Refused != 1 {
		t.Fatalf("re-ingest as %s: %+v, %v", migrate.RoleOperator, res, err)
	}
	asOp := storage.New(pgtest.As(t, owner, migrate.RoleOperator))
	ev, err := seed.EventGetByKey(ctx, "github", "role-q-1")
	if err != nil {
		t.Fatal(err)
	}
	factory.Quarantined(ctx, t, seed, &factory.QuarantinedOpts{Source: "github", Kind: "github", Body: body})
	if n, err := asOp.QuarantineCountCopies(ctx, "github", ev.EventID, ev.BodySHA256); err != nil || n != 1 {
		t.Fatalf("copies as %s: %d, %v", migrate.RoleOperator, n, err)
	}
	if n, err := asOp.QuarantineDeleteCopies(ctx, "github", ev.EventID, ev.BodySHA256); err != nil || n != 1 {
		t.Fatalf("copies erased as %s: %d, %v", migrate.RoleOperator, n, err)
	}
	if p, err := act.Purge(octx, operations.PurgeRequest{Select: operations.QuarantineSelection{Source: "github"}, Expect: new(1)}); err != nil || p.Deliveries != 1 {
		t.Fatalf("purge as %s: %+v, %v", migrate.RoleOperator, p, err)
	}
	acts, err := seed.OperatorActionList(ctx, time.Time{}, 10)
	if err != nil || len(acts) != 2 || acts[0].Action != inbox.ActionPurge || acts[1].Action != inbox.ActionReingest || acts[0].DBUser != migrate.RoleOperator {
		t.Fatalf("records: %+v, %v", acts, err)
	}
}
