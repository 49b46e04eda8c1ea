package source

import (
	"net/http"
	"strings"
)

// Readers of request headers shared by several kinds (stripe and standard
// read repeated signature headers; standard and hmac need a header exactly
// once).

// headerValue returns every value of a header joined with ", ". Proxies and
// API Gateway fold repeated headers into one comma-joined value; doing the
// same here makes a duplicated header parse identically on every transport.
func headerValue(h http.Header, name string) (string, bool) {
	vals := h.Values(name)
	if len(vals) == 0 {
		return "", false
	}
	return strings.Join(vals, ", "), true
}

// singleHeader returns a header that must appear exactly once: a repeated
// id or timestamp is ambiguous about what was signed.
func singleHeader(h http.Header, name string) (string, bool) {
	vals := h.Values(name)
	if len(vals) != 1 || vals[0] == "" {
		return "", false
	}
	return vals[0], true
}
