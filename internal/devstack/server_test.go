package devstack_test

import (
	"errors"
	"io"
	"net"
	"net/http"
	"os"
	"testing"
	"time"

	"github.com/webhook-inbox/webhook-inbox/internal/devstack"
)

// serveWith starts the dev stack's server for h with the timeouts t and
// returns its address.
func serveWith(t *testing.T, h http.Handler, to devstack.Timeouts) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := devstack.NewServer(h, to)
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })
	return ln.Addr().String()
}

// closedWithin writes what to a new connection to addr, then stalls, and
// returns how long the server took to close the connection (failing when
// it still holds it after limit).
func closedWithin(t *testing.T, addr, what string, limit time.Duration) time.Duration {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	start := time.Now()
	if _, err := io.WriteString(c, what); err != nil {
		t.Fatal(err)
	}
	_ = c.SetReadDeadline(start.Add(limit))
	_, err = io.Copy(io.Discard, c) // until the server closes it
	if errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("the server still holds a stalled connection after %s (%q sent)", limit, what)
	}
	return time.Since(start)
}

// TestStalledConnectionsAreClosed: the dev stack's server closes a
// connection that stalls in its headers or in its body after the read
// timeout (--read-timeout), where it used to hold it as long as the
// client liked (300 stalled connections held); the handler reading the
// body is given the error as soon as the time is up.
func TestStalledConnectionsAreClosed(t *testing.T) {
	t.Parallel()
	const timeout = 300 * time.Millisecond
	bodyErr := make(chan error, 1)
	addr := serveWith(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, err := io.Copy(io.Discard, r.Body)
		bodyErr <- err
		http.Error(w, "unreadable body", http.StatusBadRequest)
	}), devstack.Timeouts{Read: timeout})

	t.Run("headers", func(t *testing.T) {
		t.Parallel()
		if d := closedWithin(t, addr, "POST /webhooks/stripe HTTP/1.1\r\nHost: 127.0.0.1\r\n", 10*timeout); d < timeout/2 {
			t.Errorf("closed after %s, before the timeout %s", d, timeout)
		}
	})
	t.Run("body", func(t *testing.T) {
		t.Parallel()
		req := "POST /webhooks/stripe HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 1048576\r\n\r\n{"
		if d := closedWithin(t, addr, req, 10*timeout); d < timeout/2 {
			t.Errorf("closed after %s, before the timeout %s", d, timeout)
		}
		select {
		case err := <-bodyErr:
			if err == nil {
				t.Error("the handler read a body cut short without an error")
			}
		case <-time.After(5 * time.Second):
			t.Error("the handler never saw the stalled body end")
		}
	})
}

// TestServerTimeoutsDefaults: zero timeouts take the defaults, and the
// headers' never outlasts the whole request's.
func TestServerTimeoutsDefaults(t *testing.T) {
	t.Parallel()
	s := devstack.NewServer(http.NotFoundHandler(), devstack.Timeouts{})
	if s.ReadHeaderTimeout != devstack.DefaultReadHeaderTimeout || s.ReadTimeout != devstack.DefaultReadTimeout || s.IdleTimeout != devstack.DefaultIdleTimeout {
		t.Errorf("defaults: header %s, read %s, idle %s", s.ReadHeaderTimeout, s.ReadTimeout, s.IdleTimeout)
	}
	if s := devstack.NewServer(http.NotFoundHandler(), devstack.Timeouts{Read: time.Second}); s.ReadHeaderTimeout != time.Second {
		t.Errorf("a 1s read timeout leaves the headers %s", s.ReadHeaderTimeout)
	}
}
