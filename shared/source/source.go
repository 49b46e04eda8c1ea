// Package source authenticates and identifies webhook deliveries. Each
// sender kind (Stripe, Standard Webhooks, GitHub, Square, Shopify, and a
// configurable generic HMAC kind) has a Verifier that checks the
// signature over the raw body in constant time and extracts the event's
// identity exactly as that sender documents it. Sources are configured by
// one JSON document; a source that could not verify anything (unknown kind,
// no secret) is a start-up error, never an open door.
package source

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"regexp"
	"sort"
	"strings"
	"time"

	"github.com/webhook-inbox/webhook-inbox/shared/inbox"
)

// Verifier authenticates one delivery and returns its identity. It must
// check the signature before it trusts anything in the body, compare in
// constant time, and return *inbox.Error values with a cause code.
type Verifier interface {
	Verify(header http.Header, body []byte, now time.Time) (inbox.Identity, error)
}

// Source is one configured sender endpoint: POST /webhooks/{Name}, or
// POST /webhooks/{Name}/{token} (endpoint.go).
type Source struct {
	// Name is the URL segment and the provider column of its events.
	Name string
	// Kind is the sender scheme, e.g. "stripe" or "standard".
	Kind     string
	Verifier Verifier
	// endpoint is where it is reachable (endpoint.go).
	endpoint endpointOptions
	// keptHeaders are the headers its kind reads, which a quarantined
	// delivery keeps (KeptHeaders).
	keptHeaders []string
	// GuardBody is set when the event id is not covered by the signature
	// (GitHub, Shopify, an hmac source with an unsigned id header): a
	// captured signed body can then be posted again under a fresh id, so
	// the receiver stores each body of the source at most once, and
	// answers another id with the same body as a suspected replay.
	GuardBody bool
	// Warning is what the receiver logs about the source at start-up ("" for
	// none): a risk the configuration accepts explicitly.
	Warning string
	// Note is a rule of the source's configuration that refuses some
	// deliveries, for sources check to explain ("" for none): an hmac
	// source's ids may not hold the delimiter of its signed_content.
	Note string
	// SilentAfter is how long the source may go without a delivery
	// before it counts as silent ("silent_after"; silence.go); 0: never.
	SilentAfter time.Duration
}

// identityBinder is implemented by verifiers whose event id the signature
// does not cover.
type identityBinder interface{ identityUnsigned() bool }

// noter is implemented by verifiers whose configuration may refuse some
// deliveries by a rule worth telling the operator.
type noter interface{ templateNote() string }

// warner is implemented by verifiers that may carry a start-up warning.
type warner interface{ startWarning() string }

// Set is the configured sources, by name. It is read-only after Parse and
// safe for concurrent use.
type Set struct {
	byName map[string]*Source
}

// Lookup returns the source with the given name.
func (s *Set) Lookup(name string) (*Source, bool) {
	src, ok := s.byName[name]
	return src, ok
}

// Names returns the configured source names, sorted.
func (s *Set) Names() []string {
	names := make([]string, 0, len(s.byName))
	for n := range s.byName {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// Environment variables that carry the sources document.
const (
	EnvSources     = "WEBHOOK_SOURCES"
	EnvSourcesFile = "WEBHOOK_SOURCES_FILE"
)

// Load reads the sources document from WEBHOOK_SOURCES (inline JSON) or
// WEBHOOK_SOURCES_FILE (a path), using getenv to read the environment.
func Load(getenv func(string) string) (*Set, error) {
	inline, path := getenv(EnvSources), getenv(EnvSourcesFile)
	switch {
	case inline != "" && path != "":
		return nil, fmt.Errorf("sources: set %s or %s, not both", EnvSources, EnvSourcesFile)
	case inline != "":
		return Parse([]byte(inline))
	case path != "":
		doc, err := os.ReadFile(path)
		if err != nil {
			return nil, fmt.Errorf("sources: %w", err)
		}
		set, err := Parse(doc)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		return set, nil
	default:
		return nil, fmt.Errorf("sources: neither %s nor %s is set", EnvSources, EnvSourcesFile)
	}
}

// document is the JSON shape: {"sources": {"<name>": {"kind": ..., ...}}}.
type document struct {
	Sources map[string]json.RawMessage `json:"sources"`
}

// kindOnly reads the kind of a source before its kind decodes the rest.
type kindOnly struct {
	Kind string `json:"kind"`
}

var namePattern = regexp.MustCompile(`^[a-z0-9][a-z0-9_-]*$`)

// Parse reads and validates a sources document. Errors name the source and
// the field, and never contain a secret.
func Parse(doc []byte) (*Set, error) {
	var d document
	dec := json.NewDecoder(bytes.NewReader(doc))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&d); err != nil {
		return nil, fmt.Errorf("sources: invalid document: %w", err)
	}
	if len(d.Sources) == 0 {
		return nil, errors.New(`sources: the document configures no source (want {"sources": {"<name>": {...}}})`)
	}
	set := &Set{byName: make(map[string]*Source, len(d.Sources))}
	for name, raw := range d.Sources {
		if len(name) > inbox.MaxSourceNameLen || !namePattern.MatchString(name) {
			return nil, fmt.Errorf("sources: source %q: the name must be 1 to %d characters of a-z, 0-9, '-' and '_', starting with a letter or digit", name, inbox.MaxSourceNameLen)
		}
		var k kindOnly
		if err := json.Unmarshal(raw, &k); err != nil {
			return nil, fmt.Errorf("sources: source %q: %w", name, err)
		}
		raw, endpoint, err := takeEndpointOptions(name, raw)
		if err != nil {
			return nil, err
		}
		raw, silentAfter, err := takeSilentAfter(name, raw)
		if err != nil {
			return nil, err
		}
		build, ok := registry[k.Kind]
		if !ok {
			if k.Kind == "" {
				return nil, fmt.Errorf("sources: source %q: field \"kind\" is required (one of %v)", name, Kinds())
			}
			return nil, fmt.Errorf("sources: source %q: field \"kind\": unknown kind %q (one of %v)", name, k.Kind, Kinds())
		}
		v, err := build(name, raw)
		if err != nil {
			return nil, err
		}
		src := &Source{Name: name, Kind: k.Kind, Verifier: v, endpoint: endpoint, SilentAfter: silentAfter}
		if b, ok := v.(identityBinder); ok {
			src.GuardBody = b.identityUnsigned()
		}
		if w, ok := v.(warner); ok {
			src.Warning = w.startWarning()
		}
		if n, ok := v.(noter); ok {
			src.Note = n.templateNote()
		}
		src.keptHeaders = keptHeaderNames(src)
		set.byName[name] = src
	}
	return set, nil
}

// decodeOptions strictly decodes a source's JSON into its kind's options, so
// a misspelt field ("secret" for "secrets") fails at start-up.
func decodeOptions(name string, raw json.RawMessage, into any) error {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(into); err != nil {
		return fmt.Errorf("sources: source %q: %w", name, err)
	}
	return nil
}

// secretList checks that a source has at least one non-empty secret.
// Several secrets serve rotation: every one is tried.
func secretList(name string, secrets []string) ([]string, error) {
	if len(secrets) == 0 {
		return nil, fieldError(name, "secrets", "at least one secret is required")
	}
	for i, s := range secrets {
		if strings.TrimSpace(s) == "" {
			return nil, fieldError(name, "secrets", "secret #%d is empty", i+1)
		}
	}
	return secrets, nil
}

// fieldError is a configuration error naming the source and the field.
func fieldError(name, field, format string, args ...any) error {
	return fmt.Errorf("sources: source %q: field %q: %s", name, field, fmt.Sprintf(format, args...))
}

// errString is a plain error with a fixed message.
type errString string

func (e errString) Error() string { return string(e) }

// DefaultTolerance is how far a signed timestamp may be from now, either
// way, unless a source sets tolerance_seconds. Stripe's and Standard
// Webhooks' libraries use the same five minutes.
const DefaultTolerance = 5 * time.Minute

// MaxTolerance is the largest tolerance_seconds accepted: a signed request
// stays replayable (under a new id, where the id is not signed, or once
// its event is gone from a handler's view) for as long as its window, so a
// window of days would be no defence at all.
const MaxTolerance = time.Hour

// toleranceOption turns tolerance_seconds into a duration: 0 means the
// default; negative is an error (it would refuse everything or nothing),
// and so is more than MaxTolerance.
func toleranceOption(name string, seconds *int, def time.Duration) (time.Duration, error) {
	if seconds == nil || *seconds == 0 {
		return def, nil
	}
	if *seconds < 0 {
		return 0, fieldError(name, "tolerance_seconds", "must be positive, got %d", *seconds)
	}
	if *seconds > int(MaxTolerance/time.Second) {
		return 0, fieldError(name, "tolerance_seconds", "must be at most %d (one hour), got %d", int(MaxTolerance/time.Second), *seconds)
	}
	return time.Duration(*seconds) * time.Second, nil
}

// Minimum secret lengths, per kind, in bytes of HMAC key. Each is below
// what the sender itself issues, so a real secret is never refused, and
// far above what a guess or a brute force over a captured signature could
// find: Stripe issues "whsec_" and 32 or more characters; Standard
// Webhooks keys are 24 to 64 random bytes (the specification's range);
// Shopify's client secrets are "shpss_" and 32 hex digits, its admin
// webhook secrets 64 hex digits; Square's signature keys are 22
// characters; GitHub's secret is the user's choice, which GitHub asks to
// be "a random string of text with high entropy".
const (
	MinSecretBytes         = 16
	MinStripeSecretChars   = 24
	MinStandardSecretBytes = 24
)

// minKeyLength refuses a key shorter than min bytes, naming the source,
// the field and the secret's position, never the secret.
func minKeyLength(name string, i, n, min int) error {
	if n < min {
		return fieldError(name, "secrets", "secret #%d is %d bytes long; at least %d are required (a real secret of this kind is longer: copy it whole)", i+1, n, min)
	}
	return nil
}

// withinTolerance reports whether ts is at most tol away from now, in
// either direction: a timestamp from the future is refused too, so a
// captured request cannot be pre-dated to outlive its window.
func withinTolerance(ts, now time.Time, tol time.Duration) bool {
	d := now.Sub(ts)
	return d <= tol && d >= -tol
}
