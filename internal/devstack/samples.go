package devstack

import (
	"fmt"
	"io"
	"time"

	"github.com/webhook-inbox/webhook-inbox/internal/sender"
	"github.com/webhook-inbox/webhook-inbox/shared/source"
)

// PrintSamples prints, per source, a curl that posts a correctly signed
// new event. Signatures carry a timestamp: the commands work for the
// source's tolerance (5 minutes by default); `webhookdev sample` prints
// fresh ones.
func PrintSamples(out io.Writer, sources *source.Set, base string) {
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
