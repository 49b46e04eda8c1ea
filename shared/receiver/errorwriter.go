package receiver

import (
	"log/slog"
	"net/http"
	"strings"
)

// WriteError answers err exactly as the receiver answers its own refusals:
// the status from the one table (StatusOf, from err's cause), the JSON
// body, one log line with its cause that is also an EMF count, and for a
// refusal a sampled record in webhook_rejections. Handler is thus the
// error writer of the API Gateway adapter and of the recovery middleware
// (lambdahttp.ErrorWriter): an event that never became a request, or a
// panic (inbox.CauseInternal: 503, so the sender retries), is answered,
// logged and counted by the same table as everything else.
func (h *Handler) WriteError(w http.ResponseWriter, r *http.Request, err error) {
	h.refuse(w, r, requestedSource(r), err)
}

// requestedSource is the source name a request asks for: its route's path
// value, or, for a request the router never saw (the adapter's refusals),
// the segment after /webhooks/ in its path (followed by nothing or by an
// endpoint token, which is never returned).
func requestedSource(r *http.Request) string {
	if name := r.PathValue("source"); name != "" {
		return name
	}
	if r.URL == nil {
		return ""
	}
	rest, ok := strings.CutPrefix(r.URL.Path, "/webhooks/")
	if !ok {
		return ""
	}
	name, token, tokened := strings.Cut(rest, "/")
	if tokened && (token == "" || strings.Contains(token, "/")) {
		return ""
	}
	return name
}

// logAttrser is an error carrying attributes for its log line beyond its
// message, such as a recovered panic's value and stack.
type logAttrser interface {
	LogAttrs() []slog.Attr
}
