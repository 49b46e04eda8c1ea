package sqltext_test

import (
	"strings"
	"testing"

	"github.com/webhook-inbox/webhook-inbox/internal/testkit/sqltext"
)

func TestStorageReadsTheGeneratedText(t *testing.T) {
	t.Parallel()
	sql, err := sqltext.Storage("EventInsert")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(sql, "-- name: EventInsert :one\n") {
		t.Errorf("EventInsert's text does not start with its name line:\n%s", sql)
	}
	if !strings.Contains(sql, "$1") || strings.Contains(sql, "@source") {
		t.Errorf("EventInsert's text is not sqlc's rewrite (numbered parameters):\n%s", sql)
	}
}

func TestStorageRefusesAnUnknownQuery(t *testing.T) {
	t.Parallel()
	// EventInsert's name begins this one: only the whole name matches.
	if sql, err := sqltext.Storage("EventInsertX"); err == nil {
		t.Errorf("EventInsertX: want an error, got:\n%s", sql)
	}
}
