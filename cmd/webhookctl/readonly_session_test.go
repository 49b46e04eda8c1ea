package main

import (
	"errors"
	"testing"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/webhook-inbox/webhook-inbox/shared/operations"
)

// TestReadOnlyAPIOpensAReadOnlySession: what may only read (the read-only
// console, --read-only) reads the database through a session that
// Postgres itself keeps from writing (default_transaction_read_only), so
// that a bug above the API cannot write: a write through its pool fails
// with SQLSTATE 25006; the acting API's pool writes.
func TestReadOnlyAPIOpensAReadOnlySession(t *testing.T) {
	t.Parallel()
	f := newOpsFixture(t)
	for _, tc := range []struct {
		readOnly bool
		want     string
	}{{true, "25006"}, {false, ""}} {
		cmd := newRootCmd()
		cmd.SetContext(withEnv(f.ctx, func(k string) string { return f.env[k] }))
		access := operations.AccessAct
		if tc.readOnly {
			access = operations.AccessRead
		}
		o, _, err := openDirectOps(cmd, access)
		if err != nil {
			t.Fatal(err)
		}
		_, err = o.store.Pool().Exec(f.ctx, `UPDATE webhook_events SET event_type = event_type`)
		o.close()
		var pgErr *pgconn.PgError
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("the acting pool: a write failed: %v", err)
		case tc.want != "" && (!errors.As(err, &pgErr) || pgErr.Code != tc.want):
			t.Errorf("read-only %v: a write = %v, want SQLSTATE %s", tc.readOnly, err, tc.want)
		}
	}
}
