package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/webhook-inbox/webhook-inbox/internal/testkit/tier"
)

// postgresChildEnv makes the test binary, run by `webhookdev postgres`, a
// command that prints DATABASE_URL, connects to it, and exits with the
// status the variable holds.
const postgresChildEnv = "WEBHOOKDEV_TEST_POSTGRES_CHILD"

// postgresChild is the command: it returns its exit status.
func postgresChild() int {
	dbURL := os.Getenv("DATABASE_URL")
	fmt.Println("DATABASE_URL=" + dbURL)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	conn, err := pgx.Connect(ctx, dbURL)
	if err != nil {
		fmt.Println("connect:", err)
		return 99
	}
	defer conn.Close(ctx)
	var super string
	if err := conn.QueryRow(ctx, `SELECT current_setting('is_superuser')`).Scan(&super); err != nil {
		fmt.Println("query:", err)
		return 99
	}
	fmt.Println("superuser=" + super)
	code, _ := strconv.Atoi(os.Getenv(postgresChildEnv))
	return code
}

// TestPostgresRunsTheCommandOnAThrowawayServer: the command gets
// DATABASE_URL naming a server it can connect to as a superuser (what
// pgtest needs to create databases and roles), webhookdev exits with the
// command's status, and the server is gone afterwards.
func TestPostgresRunsTheCommandOnAThrowawayServer(t *testing.T) {
	tier.Heavy(t, "starts PostgreSQL clusters of its own")
	for _, code := range []int{0, 3} {
		t.Run(strconv.Itoa(code), func(t *testing.T) {
			t.Setenv(postgresChildEnv, strconv.Itoa(code))
			out, err := run(t, nil, "postgres", "--", os.Args[0])
			var got exitCode
			switch {
			case code == 0 && err != nil:
				t.Fatalf("exit 0 gave %v\n%s", err, out)
			case code != 0 && (!errors.As(err, &got) || int(got) != code):
				t.Fatalf("exit %d gave %v\n%s", code, err, out)
			}
			dbURL, ok := strings.CutPrefix(strings.SplitN(out, "\n", 2)[0], "DATABASE_URL=")
			if !ok || !strings.HasPrefix(dbURL, "postgres://postgres@127.0.0.1:") || !strings.HasSuffix(dbURL, "/postgres?sslmode=disable") {
				t.Fatalf("DATABASE_URL %q, want postgres://postgres@127.0.0.1:<port>/postgres?sslmode=disable\n%s", dbURL, out)
			}
			if !strings.Contains(out, "\nsuperuser=on\n") {
				t.Fatalf("the command did not connect as a superuser:\n%s", out)
			}
			ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
			defer cancel()
			if conn, err := pgx.Connect(ctx, dbURL); err == nil {
				conn.Close(ctx)
				t.Fatal("the server still answers after the command ended")
			}
		})
	}

	out, err := run(t, nil, "postgres", "--", "./no-such-command")
	if err == nil || errors.As(err, new(exitCode)) || !strings.Contains(err.Error(), "no-such-command") {
		t.Fatalf("a command that cannot start: %v\n%s", err, out)
	}
}
