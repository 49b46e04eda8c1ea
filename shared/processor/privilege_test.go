package processor_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/webhook-inbox/webhook-inbox/internal/testkit/pgtest"
	"github.com/webhook-inbox/webhook-inbox/shared/inbox"
	"github.com/webhook-inbox/webhook-inbox/shared/processor"
	"github.com/webhook-inbox/webhook-inbox/shared/storage/migrate"
)

// TestMissingPrivilegeNamesTheSchemaEntry: a handler writing to a table
// its package's Schema does not declare, run as the processor's role,
// fails its attempt with cause handler_privilege, an error that keeps the
// handler's own text and names the privilege and the Schema entry to add,
// in the history, the event's last_error and the log line; the event is
// retried (a deploy fixes it), and its dead letter says the same.
func TestMissingPrivilegeNamesTheSchemaEntry(t *testing.T) {
	t.Parallel()
	f := setup(t)
	if _, err := f.pool.Exec(f.ctx, `CREATE TABLE paid_invoices (id bigint GENERATED ALWAYS AS IDENTITY, invoice_id text NOT NULL)`); err != nil {
		t.Fatal(err)
	}
	f.reg.HandleFunc(processor.Source("stripe"), "invoice.paid", func(ctx context.Context, tx pgx.Tx, ev *processor.Event) error {
		_, err := tx.Exec(ctx, "-- name: PaidInvoiceInsert :exec\nINSERT INTO paid_invoices (invoice_id) VALUES ($1)", ev.EventID)
		if err != nil {
			return fmt.Errorf("record paid invoice %s: %w", ev.EventID, err)
		}
		return nil
	})
	id := f.insert("stripe", "invoice.paid", "in_", 1)[0]
	p := f.processorOn(processor.Config{MaxAttempts: 2}, processor.Deps{Pool: pgtest.As(t, f.pool, migrate.RoleProcessor)})

	want := `permission denied for table paid_invoices (SQLSTATE 42501): the processor's database role lacks INSERT on it, which its failing INSERT statement needs; ` +
		`declare it in your handler package's processor.HandlerSchema Grants ("paid_invoices": {"INSERT", ...}) and deploy (make dev applies it at start)`
	if st := f.drain(p); st.Retried != 1 {
		t.Fatalf("drain = %+v", st)
	}
	r := f.row(id)
	if !strings.HasPrefix(r.LastError, "record paid invoice in_") || !strings.HasSuffix(r.LastError, want) || r.DeadAt != nil {
		t.Fatalf("last_error = %q (dead %v), want the handler's text then\n%s", r.LastError, r.DeadAt, want)
	}
	if h := f.history(id); len(h) != 1 || h[0].Cause != inbox.CauseHandlerPrivilege || h[0].Error != r.LastError {
		t.Fatalf("history = %+v", h)
	}
	lines := f.logs.lines(t, "attempt failed")
	if len(lines) != 1 || lines[0]["cause"] != string(inbox.CauseHandlerPrivilege) || !strings.HasSuffix(lines[0]["err"].(string), want) {
		t.Fatalf("log lines = %v", lines)
	}

	// Retried like any failure, then dead-lettered with the same text.
	f.clock.Advance(processor.DefaultBackoffCap)
	if st := f.drain(p); st.DeadLettered != 1 {
		t.Fatalf("second drain = %+v", st)
	}
	var lastError string
	if err := f.pool.QueryRow(f.ctx, `SELECT last_error FROM webhook_dead_letters WHERE event_pk = $1`, id).Scan(&lastError); err != nil || !strings.HasSuffix(lastError, want) {
		t.Fatalf("dead letter's last_error = %q, %v", lastError, err)
	}
}

// TestPrivilegeErrorNamesWhatTheStatementNeeds: the privilege named
// follows the failing statement's verb and what it reads; a sequence
// points at its table; an error that is not 42501 is left alone.
func TestPrivilegeErrorNamesWhatTheStatementNeeds(t *testing.T) {
	t.Parallel()
	denied := func(object string) error {
		return fmt.Errorf("handler: %w", &pgconn.PgError{Code: "42501", Message: "permission denied for " + object})
	}
	for _, c := range []struct {
		err  error
		stmt string
		want string // "" when not wrapped
	}{
		{denied("table t"), "INSERT INTO t (a) VALUES ($1)", `lacks INSERT on it, which its failing INSERT statement needs; declare it in your handler package's processor.HandlerSchema Grants ("t": {"INSERT", ...})`},
		{denied("table t"), "-- name: TUpsert :one\n/* c */ insert into t (a) values ($1) on conflict (a) do update set a = excluded.a returning a", `lacks INSERT or SELECT or UPDATE on it, which its failing INSERT statement needs; declare it in your handler package's processor.HandlerSchema Grants ("t": {"INSERT", "SELECT", "UPDATE", ...})`},
		{denied("table t"), "UPDATE t SET a = 1 WHERE b = $1", `lacks UPDATE or SELECT on it, which its failing UPDATE statement needs; declare it in your handler package's processor.HandlerSchema Grants ("t": {"UPDATE", "SELECT", ...})`},
		{denied("table t"), "DELETE FROM t", `("t": {"DELETE", ...})`},
		{denied("table t"), "SELECT a FROM t WHERE b = $1 FOR UPDATE", `("t": {"SELECT", "UPDATE", ...})`},
		{denied("table t"), "WITH x AS (SELECT 1) INSERT INTO t SELECT * FROM x", `lacks a privilege on it; declare it in your handler package's processor.HandlerSchema Grants ("t": {"SELECT", "INSERT", ...})`},
		{denied("table t"), "", `lacks a privilege on it;`},
		{denied("sequence t_id_seq"), "INSERT INTO t (a) VALUES (1)", `lacks USAGE on it; declare the table that owns it in your handler package's processor.HandlerSchema Grants, with INSERT`},
		{denied("schema other"), "SELECT 1", `declare what your handler's statements use in your handler package's processor.HandlerSchema Grants`},
		{fmt.Errorf("x: %w", &pgconn.PgError{Code: "23505", Message: "duplicate key"}), "INSERT INTO t VALUES (1)", ""},
		{errors.New("plain"), "INSERT INTO t VALUES (1)", ""},
	} {
		got := processor.PrivilegeError(c.err, c.stmt)
		if c.want == "" {
			if got != nil {
				t.Errorf("%v wrapped: %v", c.err, got)
			}
			continue
		}
		if got == nil {
			t.Errorf("%q on %v: not wrapped", c.stmt, c.err)
			continue
		}
		msg := got.Error()
		if !strings.HasPrefix(msg, c.err.Error()+": ") {
			t.Errorf("%q on %v:\n%s\nwant it to start with the error", c.stmt, c.err, msg)
		}
		if !strings.Contains(msg, c.want) {
			t.Errorf("%q on %v:\n%s\nwant it to contain\n%s", c.stmt, c.err, msg, c.want)
		}
		if !strings.HasSuffix(msg, "and deploy (make dev applies it at start)") {
			t.Errorf("%q on %v:\n%s\nwant it to end with the deploy", c.stmt, c.err, msg)
		}
		var pgErr *pgconn.PgError
		if !errors.As(got, &pgErr) {
			t.Errorf("the wrap lost the PgError: %v", got)
		}
	}
}
