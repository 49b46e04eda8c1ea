package main

import (
	"encoding/json"
	"io"
	"net/http"
	"time"
)

func readAll(r io.Reader) ([]byte, error) { return io.ReadAll(io.LimitReader(r, 64<<20)) }

func httpClient() *http.Client { return &http.Client{Timeout: 30 * time.Second} }

// answerOrString keeps a JSON answer as is and quotes anything else.
func answerOrString(b []byte) []byte {
	if json.Valid(b) {
		return b
	}
	q, _ := json.Marshal(string(b))
	return q
}
