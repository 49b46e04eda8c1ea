package devstack

import (
	"fmt"
	"io"
	"path"
	"time"

	"github.com/webhook-inbox/webhook-inbox/internal/sender"
	"github.com/webhook-inbox/webhook-inbox/shared/source"
)

// SamplesDir is where the checked-in sample event of each source kind
// lives, one file per kind (dev/samples/<kind>.json), for `webhookdev
// send`.
const SamplesDir = "dev/samples"

// DefaultBase is the receiver's address `webhookdev send` and `sample`
// post to when given no --url.
const DefaultBase = "http://127.0.0.1:3000"

// PrintSamples says how to post a signed sample event to each source.
// Compact (full false), one line per source: the `webhookdev send` of
// the kind's sample file, which signs it when run, so the line never
// expires. Full, per source, a curl with a signature made now: it works
// for the source's tolerance (5 minutes by default) and makes 60 lines
// for the six kinds, hence only on request (--samples); `webhookdev
// sample` prints a fresh one at any time.
func PrintSamples(out io.Writer, sources *source.Set, base string, full bool) {
	if full {
		printCurls(out, sources, base)
		return
	}
	url := ""
	if base != DefaultBase {
		url = " --url " + base
	}
	fmt.Fprintln(out, "samples: sign and post a sample event, one command per source:")
	now := time.Now()
	for _, name := range sources.Names() {
		src, _ := sources.Lookup(name)
		typ := ""
		if t := headerType(src, now); t != "" {
			typ = " --type " + t
		}
		fmt.Fprintf(out, "  go run ./cmd/webhookdev send %s %s%s%s\n", name, path.Join(SamplesDir, src.Kind+".json"), typ, url)
	}
	fmt.Fprintln(out, "  (a curl with a signature made now: go run ./cmd/webhookdev sample SOURCE; all of them at start-up: --samples)")
}

// headerType is the event type of src's sample when src's kind sends the
// type in a header (github, shopify, hmac with a type header), which
// `webhookdev send` then needs as --type; "" when the type is in the body.
// Whether it is in a header is seen by signing with and without a type,
// so no list of kinds here goes stale.
func headerType(src *source.Source, now time.Time) string {
	s, err := src.Sample(now)
	if err != nil || s.EventType == "" {
		return ""
	}
	with, err1 := src.SignEvent(s.Body, s.EventID, s.EventType, now)
	without, err2 := src.SignEvent(s.Body, s.EventID, "", now)
	if err1 != nil || err2 != nil || len(with) == len(without) {
		return ""
	}
	return s.EventType
}

// printCurls prints, per source, a curl that posts a correctly signed
// new event.
func printCurls(out io.Writer, sources *source.Set, base string) {
	now := time.Now()
	for _, name := range sources.Names() {
		src, _ := sources.Lookup(name)
		req, err := sender.Sample(src, now)
		if err != nil {
			continue
		}
		validity := "its signature carries no timestamp, so it stays valid; posted once, it is a duplicate for ever after"
		if src.Tolerance() > 0 {
			validity = "valid for the source's tolerance, 5 minutes by default"
		}
		fmt.Fprintf(out, "\n# a signed sample %s event (%s; `go run ./cmd/webhookdev sample %s` prints a fresh one):\n%s\n", src.Kind, validity, name, req.Curl(base))
	}
	fmt.Fprintln(out)
}
