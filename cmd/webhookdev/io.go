package main

import (
	"encoding/json"
	"io"
	"net/http"
	"time"

	"github.com/webhook-inbox/webhook-inbox/shared/inbox"
)

func readAll(r io.Reader) ([]byte, error) { return io.ReadAll(io.LimitReader(r, 64<<20)) }

func httpClient() *http.Client { return &http.Client{Timeout: 30 * time.Second} }

// answerOrString keeps a JSON answer as is and quotes anything else,
// with its control characters escaped either way (the server at --url may
// be anyone's, and the answer goes to a terminal).
func answerOrString(b []byte) []byte {
	if json.Valid(b) {
		return []byte(safeAnswer(b))
	}
	q, _ := json.Marshal(string(b))
	return []byte(safeAnswer(q))
}

// safeAnswer is an answer's text with its control characters escaped
// (inbox.EscapeControls, as webhookctl prints everything).
func safeAnswer(b []byte) string { return inbox.EscapeControls(string(b), "\n\t") }
