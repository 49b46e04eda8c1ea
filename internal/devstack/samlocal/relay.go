package samlocal

import (
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
)

// BridgeInterface is Docker's default bridge on Linux; the address
// host-gateway resolves to is its own.
const BridgeInterface = "docker0"

// BridgeAddr returns the IPv4 address of Docker's default bridge, where a
// container's host.docker.internal (with --add-host
// host.docker.internal:host-gateway) arrives; ok is false on a machine
// without one (no Docker, or Docker Desktop, which needs no relay).
func BridgeAddr() (addr string, ok bool) {
	ifc, err := net.InterfaceByName(BridgeInterface)
	if err != nil {
		return "", false
	}
	addrs, err := ifc.Addrs()
	if err != nil {
		return "", false
	}
	for _, a := range addrs {
		if n, isNet := a.(*net.IPNet); isNet && n.IP.To4() != nil {
			return n.IP.String(), true
		}
	}
	return "", false
}

// Relay forwards connections from host:port to 127.0.0.1:port, for each
// of its ports.
type Relay struct {
	listeners []net.Listener
	wg        sync.WaitGroup
	mu        sync.Mutex
	conns     map[net.Conn]struct{}
	closed    bool
}

// StartRelay listens on host at each port and forwards what arrives to the
// same port on the loopback. Close stops it and its connections.
func StartRelay(host string, ports []string) (*Relay, error) {
	r := &Relay{conns: map[net.Conn]struct{}{}}
	for _, port := range ports {
		ln, err := net.Listen("tcp", net.JoinHostPort(host, port))
		if err != nil {
			r.Close()
			return nil, fmt.Errorf("relay %s:%s to the loopback: %w", host, port, err)
		}
		r.listeners = append(r.listeners, ln)
		target := net.JoinHostPort("127.0.0.1", port)
		r.wg.Go(func() { r.serve(ln, target) })
	}
	return r, nil
}

func (r *Relay) serve(ln net.Listener, target string) {
	for {
		in, err := ln.Accept()
		if err != nil {
			return // closed
		}
		if !r.track(in) {
			in.Close()
			return
		}
		r.wg.Go(func() {
			defer r.untrack(in)
			out, err := net.Dial("tcp", target)
			if err != nil {
				return // the server is gone: the client sees the connection close
			}
			if !r.track(out) {
				out.Close()
				return
			}
			defer r.untrack(out)
			var both sync.WaitGroup
			both.Go(func() { pipe(out, in) })
			both.Go(func() { pipe(in, out) })
			both.Wait()
		})
	}
}

// pipe copies src to dst, then tells dst no more is coming (a half close,
// so that a protocol's last words still arrive).
func pipe(dst, src net.Conn) {
	_, _ = io.Copy(dst, src)
	if tc, ok := dst.(*net.TCPConn); ok {
		_ = tc.CloseWrite()
	} else {
		_ = dst.Close()
	}
}

func (r *Relay) track(c net.Conn) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return false
	}
	r.conns[c] = struct{}{}
	return true
}

func (r *Relay) untrack(c net.Conn) {
	r.mu.Lock()
	delete(r.conns, c)
	r.mu.Unlock()
	c.Close()
}

// Close stops listening, closes the connections in progress and waits for
// the relay's goroutines.
func (r *Relay) Close() error {
	r.mu.Lock()
	r.closed = true
	var errs []error
	for _, ln := range r.listeners {
		errs = append(errs, ln.Close())
	}
	for c := range r.conns {
		c.Close()
	}
	r.mu.Unlock()
	r.wg.Wait()
	return errors.Join(errs...)
}
