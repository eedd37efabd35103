package safehttp

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"strconv"
	"syscall"
	"time"
)

// MaxAnswer is how much of an answer's body is read (for the error a failed delivery records).
const MaxAnswer = 4 << 10

// ErrRefused wraps every refusal of a destination.
var ErrRefused = errors.New("destination refused")

// Options say which destinations are allowed.
type Options struct {
	// Allow are networks reachable although not public.
	Allow []netip.Prefix
	// AllowHTTP permits http:// URLs.
	AllowHTTP bool
	// Timeout bounds one request, answer included.
	Timeout time.Duration
}

// Client posts to checked destinations.
type Client struct {
	opt  Options
	http *http.Client
}

// New builds a client.
func New(opt Options) *Client {
	c := &Client{opt: opt}
	dialer := &net.Dialer{Timeout: opt.Timeout, Control: c.control}
	tr := &http.Transport{
		Proxy:                 nil, // a proxy would connect on our behalf, past the check
		DialContext:           dialer.DialContext,
		ForceAttemptHTTP2:     true,
		MaxIdleConnsPerHost:   8,
		IdleConnTimeout:       90 * time.Second,
		TLSHandshakeTimeout:   opt.Timeout,
		ResponseHeaderTimeout: opt.Timeout,
	}
	c.http = &http.Client{
		Transport:     tr,
		Timeout:       opt.Timeout,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
	return c
}

// CloseIdle closes idle connections (a stopping notifier).
func (c *Client) CloseIdle() { c.http.CloseIdleConnections() }

// CheckURL says whether raw is a URL the client may post to, before any connection: absolute,
// https (or http when allowed), a host, no user info. A literal address is checked here too; names
// are checked when dialled.
func (c *Client) CheckURL(raw string) (*url.URL, error) {
	u, err := url.Parse(raw)
	if err != nil || u.Host == "" || u.Hostname() == "" {
		return nil, fmt.Errorf("%w: %q is not an absolute URL", ErrRefused, raw)
	}
	switch {
	case u.Scheme == "https":
	case u.Scheme == "http" && c.opt.AllowHTTP:
	default:
		return nil, fmt.Errorf("%w: scheme %q (only https)", ErrRefused, u.Scheme)
	}
	if u.User != nil {
		return nil, fmt.Errorf("%w: user info in the URL", ErrRefused)
	}
	if ip, err := netip.ParseAddr(u.Hostname()); err == nil {
		if err := c.checkAddr(ip); err != nil {
			return nil, err
		}
	}
	return u, nil
}

// control runs after resolution, before connect, for every address tried.
func (c *Client) control(_, address string, _ syscall.RawConn) error {
	ap, err := netip.ParseAddrPort(address)
	if err != nil {
		return fmt.Errorf("%w: unparsable address %q", ErrRefused, address)
	}
	return c.checkAddr(ap.Addr())
}

func (c *Client) checkAddr(ip netip.Addr) error {
	ip = ip.Unmap()
	for _, p := range c.opt.Allow {
		if p.Contains(ip) {
			return nil
		}
	}
	if !Public(ip) {
		return fmt.Errorf("%w: %s is not a public address", ErrRefused, ip)
	}
	return nil
}

// nonPublic are the special-purpose ranges of IANA's IPv4 and IPv6 registries (RFC 6890 and
// successors) that the netip Is*-methods do not cover. A range that embeds or relays to another
// address (NAT64, 6to4, Teredo, IPv4-compatible and -translated IPv6) is refused whole, since the
// address it reaches is not the one checked here.
var nonPublic = []netip.Prefix{
	netip.MustParsePrefix("0.0.0.0/8"),
	netip.MustParsePrefix("100.64.0.0/10"), // carrier-grade NAT
	netip.MustParsePrefix("192.0.0.0/24"),
	netip.MustParsePrefix("192.0.2.0/24"),
	netip.MustParsePrefix("192.31.196.0/24"), // AS112
	netip.MustParsePrefix("192.52.193.0/24"), // AMT
	netip.MustParsePrefix("192.88.99.0/24"),  // 6to4 relay anycast
	netip.MustParsePrefix("192.175.48.0/24"), // AS112 direct delegation
	netip.MustParsePrefix("198.18.0.0/15"),
	netip.MustParsePrefix("198.51.100.0/24"),
	netip.MustParsePrefix("203.0.113.0/24"),
	netip.MustParsePrefix("240.0.0.0/4"),
	netip.MustParsePrefix("::/96"),           // IPv4-compatible (deprecated) embeds an IPv4 address
	netip.MustParsePrefix("::ffff:0:0:0/96"), // IPv4-translated (SIIT)
	netip.MustParsePrefix("64:ff9b::/96"),    // NAT64 reaches any IPv4 address, private ones too
	netip.MustParsePrefix("64:ff9b:1::/48"),
	netip.MustParsePrefix("100::/64"),
	netip.MustParsePrefix("2001::/23"), // IETF protocol assignments: Teredo, benchmarking, ORCHID
	netip.MustParsePrefix("2001:db8::/32"),
	netip.MustParsePrefix("2002::/16"), // 6to4 embeds an IPv4 address
	netip.MustParsePrefix("3fff::/20"), // documentation
	netip.MustParsePrefix("5f00::/16"), // SRv6 segment identifiers
	netip.MustParsePrefix("fec0::/10"), // site-local (deprecated), private in practice
}

// Public reports whether ip is a global unicast address outside every private and special range.
func Public(ip netip.Addr) bool {
	ip = ip.Unmap()
	if !ip.IsValid() || !ip.IsGlobalUnicast() || ip.IsPrivate() || ip.IsLoopback() || ip.IsLinkLocalUnicast() ||
		ip.IsMulticast() || ip.IsUnspecified() || ip.IsInterfaceLocalMulticast() {
		return false
	}
	for _, p := range nonPublic {
		if p.Contains(ip) {
			return false
		}
	}
	return true
}

// Answer is what a receiver answered.
type Answer struct {
	Status     int
	RetryAfter time.Duration // from Retry-After, zero when absent
	Body       string        // at most MaxAnswer bytes
}

// Do sends req (its URL checked first) and reads the answer to the bound.
func (c *Client) Do(ctx context.Context, req *http.Request) (Answer, error) {
	if _, err := c.CheckURL(req.URL.String()); err != nil {
		return Answer{}, err
	}
	resp, err := c.http.Do(req.WithContext(ctx)) //nolint:gosec // the URL was checked above and every address is checked again when dialled
	if err != nil {
		return Answer{}, err
	}
	defer func() { _ = resp.Body.Close() }()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, MaxAnswer))
	return Answer{Status: resp.StatusCode, RetryAfter: retryAfter(resp.Header.Get("Retry-After"), time.Now()), Body: string(body)}, nil
}

// retryAfter parses Retry-After as seconds or an HTTP date.
func retryAfter(v string, now time.Time) time.Duration {
	if v == "" {
		return 0
	}
	if secs, err := strconv.Atoi(v); err == nil {
		return time.Duration(max(secs, 0)) * time.Second
	}
	if t, err := http.ParseTime(v); err == nil && t.After(now) {
		return t.Sub(now)
	}
	return 0
}
