package source

import (
	"crypto/sha256"
	"crypto/subtle"
	"encoding/json"
	"regexp"
)

// A source's endpoint: where the receiver accepts its deliveries. Without
// an endpoint token it is POST /webhooks/{name}, as it always was. With
// one ("endpoint_token" in the sources document) it is also
// POST /webhooks/{name}/{token}, and with "untokened_path": false only
// there: a URL nobody can guess, so a flood aimed at the source needs
// the URL the sender was given, and a sender's URL cannot be found by
// trying names.
const (
	fieldEndpointToken = "endpoint_token"
	fieldUntokenedPath = "untokened_path"
)

// MinEndpointTokenLen is the shortest endpoint token accepted: 32
// characters of [A-Za-z0-9_-] carry 192 bits (`openssl rand -base64 32 |
// tr +/ -_ | tr -d =` makes a 43-character one).
const MinEndpointTokenLen = 32

var tokenPattern = regexp.MustCompile(`^[A-Za-z0-9_-]+$`)

// endpointOptions are the options every kind shares about its endpoint.
// They are taken out of a source's JSON before its kind decodes the rest.
type endpointOptions struct {
	token     string
	untokened bool
}

// takeEndpointOptions removes the endpoint options from a source's JSON and
// validates them; the error names the source and the field, never the
// token.
func takeEndpointOptions(name string, raw json.RawMessage) (json.RawMessage, endpointOptions, error) {
	opts := endpointOptions{untokened: true}
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(raw, &fields); err != nil || fields == nil {
		return raw, opts, nil // the kind's strict decoding reports it
	}
	tok, hasTok := fields[fieldEndpointToken]
	unt, hasUnt := fields[fieldUntokenedPath]
	if !hasTok && !hasUnt {
		return raw, opts, nil
	}
	delete(fields, fieldEndpointToken)
	delete(fields, fieldUntokenedPath)
	if hasTok {
		if err := json.Unmarshal(tok, &opts.token); err != nil {
			return nil, opts, fieldError(name, fieldEndpointToken, "must be a string")
		}
		if len(opts.token) < MinEndpointTokenLen || !tokenPattern.MatchString(opts.token) {
			return nil, opts, fieldError(name, fieldEndpointToken, "must be at least %d characters of A-Z, a-z, 0-9, '-' and '_'", MinEndpointTokenLen)
		}
	}
	if hasUnt {
		if err := json.Unmarshal(unt, &opts.untokened); err != nil {
			return nil, opts, fieldError(name, fieldUntokenedPath, "must be true or false")
		}
		if !opts.untokened && opts.token == "" {
			return nil, opts, fieldError(name, fieldUntokenedPath, "false needs an %q: the source would have no endpoint", fieldEndpointToken)
		}
	}
	rest, err := json.Marshal(fields)
	if err != nil {
		return nil, opts, fieldError(name, fieldEndpointToken, "%v", err)
	}
	return rest, opts, nil
}

// HasEndpointToken reports whether the source is reachable at
// /webhooks/{name}/{token}.
func (s *Source) HasEndpointToken() bool { return s.endpoint.token != "" }

// UntokenedPath reports whether the source is reachable at /webhooks/{name}.
func (s *Source) UntokenedPath() bool { return s.endpoint.untokened }

// Path is the path to register with the sender: /webhooks/{name}/{token}
// when the source has an endpoint token, else /webhooks/{name}. It
// contains the token: print it only to the operator.
func (s *Source) Path() string {
	if s.endpoint.token != "" {
		return "/webhooks/" + s.Name + "/" + s.endpoint.token
	}
	return "/webhooks/" + s.Name
}

// AllowsEndpoint reports whether a request may reach the source at the path
// it came by: with token (tokened true) at /webhooks/{name}/{token}, else
// at /webhooks/{name}. Tokens are compared in constant time (over their
// SHA-256, so their lengths do not show either).
func (s *Source) AllowsEndpoint(token string, tokened bool) bool {
	if !tokened {
		return s.endpoint.untokened
	}
	if s.endpoint.token == "" {
		return false
	}
	got, want := sha256.Sum256([]byte(token)), sha256.Sum256([]byte(s.endpoint.token))
	return subtle.ConstantTimeCompare(got[:], want[:]) == 1
}
