package destination

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"syscall"
	"time"
)

// refusedPrefixes are the networks forwarding never connects to unless
// private destinations are allowed: no webhook consumer on the internet has
// such an address, and each is a way into what the inbox can reach and
// its senders cannot (the VPC, the instance metadata service, the host).
var refusedPrefixes = []struct {
	prefix netip.Prefix
	class  string
}{
	{netip.MustParsePrefix("0.0.0.0/8"), "unspecified, 0.0.0.0/8"},
	{netip.MustParsePrefix("127.0.0.0/8"), "loopback"},
	{netip.MustParsePrefix("10.0.0.0/8"), "private, RFC 1918"},
	{netip.MustParsePrefix("172.16.0.0/12"), "private, RFC 1918"},
	{netip.MustParsePrefix("192.168.0.0/16"), "private, RFC 1918"},
	{netip.MustParsePrefix("100.64.0.0/10"), "shared address space, CGNAT"},
	{netip.MustParsePrefix("169.254.0.0/16"), "link-local, the instance metadata service's among them"},
	{netip.MustParsePrefix("224.0.0.0/4"), "multicast"},
	{netip.MustParsePrefix("240.0.0.0/4"), "reserved or broadcast"},
	{netip.MustParsePrefix("::/128"), "unspecified"},
	{netip.MustParsePrefix("::1/128"), "loopback"},
	{netip.MustParsePrefix("fc00::/7"), "private, unique local fc00::/7"},
	{netip.MustParsePrefix("fe80::/10"), "link-local"},
	{netip.MustParsePrefix("ff00::/8"), "multicast"},
}

// nat64 is the well-known NAT64 prefix (RFC 6052): its addresses reach the
// IPv4 address in their last 32 bits, which is judged instead.
var nat64 = netip.MustParsePrefix("64:ff9b::/96")

// refusedClass names the class of a refused address, or "" for an address
// forwarding may connect to. An IPv4-mapped (::ffff:a.b.c.d) or NAT64
// address is judged by the IPv4 address it reaches.
func refusedClass(a netip.Addr) string {
	a = a.Unmap()
	if a.Is6() && nat64.Contains(a) {
		b := a.As16()
		a = netip.AddrFrom4([4]byte(b[12:]))
	}
	for _, p := range refusedPrefixes {
		if p.prefix.Contains(a) {
			return p.class
		}
	}
	return ""
}

// refusedError is a connection forwarding would not make.
type refusedError struct {
	addr  netip.Addr
	class string
}

func (e *refusedError) Error() string {
	return fmt.Sprintf("refused to connect to %s (%s): forwarding reaches only public addresses unless private destinations are allowed", e.addr, e.class)
}

// lookupFunc resolves a host name to its addresses.
type lookupFunc func(ctx context.Context, host string) ([]netip.Addr, error)

// dialer connects forwarding's requests. Its check runs in the dialer's
// Control, on the address the socket is about to connect to, after every
// resolution: a name that resolves to a public address when asked and to
// a private one when connected (DNS rebinding) is refused all the same.
type dialer struct {
	allowPrivate bool
	lookup       lookupFunc
	net          net.Dialer
}

func newDialer(allowPrivate bool) *dialer {
	d := &dialer{allowPrivate: allowPrivate, lookup: lookupHost}
	d.net = net.Dialer{Timeout: 10 * time.Second, KeepAlive: 30 * time.Second, Control: d.control}
	return d
}

func lookupHost(ctx context.Context, host string) ([]netip.Addr, error) {
	return net.DefaultResolver.LookupNetIP(ctx, "ip", host)
}

func (d *dialer) control(_, address string, _ syscall.RawConn) error {
	if d.allowPrivate {
		return nil
	}
	ap, err := netip.ParseAddrPort(address)
	if err != nil {
		return fmt.Errorf("refused to connect to %q: not an address", address)
	}
	if class := refusedClass(ap.Addr()); class != "" {
		return &refusedError{addr: ap.Addr().Unmap(), class: class}
	}
	return nil
}

// DialContext resolves the host itself (so that tests may resolve names
// as they wish) and tries each address in turn; every connection passes
// control. When every address fails, the error is the first refusal if
// there was one, so that a name resolving to private addresses only says
// so rather than "connection refused".
func (d *dialer) DialContext(ctx context.Context, network, address string) (net.Conn, error) {
	host, port, err := net.SplitHostPort(address)
	if err != nil {
		return nil, err
	}
	var addrs []netip.Addr
	if a, err := netip.ParseAddr(host); err == nil {
		addrs = []netip.Addr{a}
	} else {
		addrs, err = d.lookup(ctx, host)
		if err != nil {
			return nil, fmt.Errorf("resolve %s: %w", host, err)
		}
		if len(addrs) == 0 {
			return nil, fmt.Errorf("resolve %s: no addresses", host)
		}
	}
	var first, refused error
	for _, a := range addrs {
		conn, err := d.net.DialContext(ctx, network, net.JoinHostPort(a.Unmap().String(), port))
		if err == nil {
			return conn, nil
		}
		var r *refusedError
		if refused == nil && errors.As(err, &r) {
			refused = err
		}
		if first == nil {
			first = err
		}
		if ctx.Err() != nil {
			break
		}
	}
	if refused != nil {
		return nil, refused
	}
	return nil, first
}
