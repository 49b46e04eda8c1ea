package receiver_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"runtime"
	"testing"

	"github.com/webhook-inbox/webhook-inbox/shared/inbox"
)

// oneByte is a body that sends one byte and then stalls out: what a client
// that declared a large Content-Length and never sent the rest leaves.
type oneByte struct{ sent bool }

func (b *oneByte) Read(p []byte) (int, error) {
	if b.sent {
		return 0, io.ErrUnexpectedEOF
	}
	b.sent = true
	p[0] = '{'
	return 1, nil
}

// TestDeclaredSizeIsNotReservedUpFront: a request declaring 1 MiB (under
// the limit) but sending one byte costs the bytes it sent, not the size it
// declared; the local receiver (make dev) serves requests whose
// Content-Length nobody has checked, so 300 stalled ones held 300 MB. It
// is refused as an unreadable body.
//
// Not parallel: runtime.MemStats counts the whole process's allocations.
func TestDeclaredSizeIsNotReservedUpFront(t *testing.T) {
	f := setup(t)
	const declared, requests = 1 << 20, 64
	send := func() {
		r := httptest.NewRequest(http.MethodPost, "/webhooks/stripe", &oneByte{})
		r.ContentLength = declared
		if a := f.do(r); a.Cause != inbox.CauseUnreadableBody {
			t.Fatalf("a body cut short = %d %s, want %s", a.Code, a.Cause, inbox.CauseUnreadableBody)
		}
	}
	send() // warm up: the first refusal's sample, pools, templates
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	for range requests {
		send()
	}
	runtime.ReadMemStats(&after)
	perRequest := (after.TotalAlloc - before.TotalAlloc) / requests
	if perRequest >= declared/4 {
		t.Errorf("each request declaring %d bytes and sending 1 allocated %d bytes: the declared size is reserved before it is read", declared, perRequest)
	}
}
