package devstack

import (
	"cmp"
	"net/http"
	"time"
)

// Timeouts bound how long the dev stack's HTTP servers (the receiver on
// --addr and the local operator API) wait for a client: a connection that
// stalls (a slow-loris: headers or a body sent a byte at a time, or never
// finished) is closed after them instead of being held for ever. A zero
// field takes its default.
type Timeouts struct {
	// ReadHeader bounds the reading of a request's headers
	// (DefaultReadHeaderTimeout).
	ReadHeader time.Duration
	// Read bounds the reading of a whole request, headers and body
	// (DefaultReadTimeout): the receiver reads the body before answering,
	// so a stalled body is cut here.
	Read time.Duration
	// Idle bounds how long a kept-alive connection waits for its next
	// request (DefaultIdleTimeout).
	Idle time.Duration
}

// The default timeouts: generous for a person with curl or a sender's
// retry, short enough that stalled connections do not pile up. A deployed
// function URL reads the request before the function runs, so these
// matter only here.
const (
	DefaultReadHeaderTimeout = 10 * time.Second
	DefaultReadTimeout       = 30 * time.Second
	DefaultIdleTimeout       = 60 * time.Second
)

// withDefaults fills the zero fields; a header timeout longer than the
// whole read is cut to it.
func (t Timeouts) withDefaults() Timeouts {
	t.Read = cmp.Or(t.Read, DefaultReadTimeout)
	t.ReadHeader = min(cmp.Or(t.ReadHeader, DefaultReadHeaderTimeout), t.Read)
	t.Idle = cmp.Or(t.Idle, DefaultIdleTimeout)
	return t
}

// NewServer is the dev stack's HTTP server for h, with the timeouts t
// (zero fields: the defaults). Bodies are read by the handler as they
// arrive, never reserved at their declared length
// (receiver.Handler's readBody).
func NewServer(h http.Handler, t Timeouts) *http.Server {
	t = t.withDefaults()
	return &http.Server{Handler: h, ReadHeaderTimeout: t.ReadHeader, ReadTimeout: t.Read, IdleTimeout: t.Idle}
}
