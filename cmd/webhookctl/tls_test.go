package main

import (
	"strings"
	"testing"
)

// TestOperatorCommandsRefuseWeakTLS: webhookctl opens the database as the
// functions do, so a URL asking for less TLS than DATABASE_SSLMODE
// (default verify-full) is refused before any dial, naming the setting
// that would accept it.
func TestOperatorCommandsRefuseWeakTLS(t *testing.T) {
	t.Parallel()
	for _, args := range [][]string{{"stats"}, {"migrate", "status"}} {
		_, _, err := runIn(t, t.TempDir(), map[string]string{
			"DATABASE_URL": "postgres://ops:hunter2@db.example.internal:5432/inbox?sslmode=require&connect_timeout=1",
		}, args...)
		if err == nil || !strings.Contains(err.Error(), "sslmode=require") || !strings.Contains(err.Error(), "set DATABASE_SSLMODE=require") ||
			strings.Contains(err.Error(), "hunter2") {
			t.Errorf("%v: %v, want sslmode=require refused", args, err)
		}
	}
}
