package lambdahttp

import (
	"bytes"
	"encoding/base64"
	"fmt"
	"mime"
	"net/http"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/aws/aws-lambda-go/events"

	"github.com/webhook-inbox/webhook-inbox/shared/inbox"
)

// sniffLen is how much of the body http.DetectContentType looks at.
const sniffLen = 512

// responseWriter buffers the whole response, because payload 2.0 returns it
// as one JSON document rather than a stream.
type responseWriter struct {
	header http.Header
	// status is 0 until the final status is written; written holds the
	// header snapshot taken then, as the net/http server sends headers at
	// that point and ignores later changes.
	status  int
	written http.Header
	body    bytes.Buffer
}

var _ http.Flusher = (*responseWriter)(nil)

func newResponseWriter() *responseWriter {
	return &responseWriter{header: make(http.Header)}
}

// Header returns the header map that WriteHeader will snapshot.
func (w *responseWriter) Header() http.Header { return w.header }

// WriteHeader records the status. Like net/http it panics on a code outside
// 100-999 (a handler bug, answered by Handler's recovery), ignores
// informational codes (API Gateway cannot relay them) and ignores every call
// after the first.
func (w *responseWriter) WriteHeader(code int) {
	if code < 100 || code > 999 {
		panic(fmt.Sprintf("invalid WriteHeader code %v", code))
	}
	if w.status != 0 || code < 200 {
		return
	}
	w.status = code
	w.written = w.header.Clone()
}

// Write buffers p, implying a 200 status if none was written, and refuses a
// body for statuses that cannot have one, as net/http does.
func (w *responseWriter) Write(p []byte) (int, error) {
	if w.status == 0 {
		w.WriteHeader(http.StatusOK)
	}
	if !bodyAllowed(w.status) {
		return 0, http.ErrBodyNotAllowed
	}
	return w.body.Write(p)
}

// Flush is a no-op: everything is sent when the handler returns. It exists
// so handlers that flush (directly or via http.ResponseController) work
// unchanged instead of failing their type assertion.
func (w *responseWriter) Flush() {}

// result converts what the handler wrote into the Lambda response.
func (w *responseWriter) result() events.APIGatewayV2HTTPResponse {
	if w.status == 0 {
		// The handler returned without writing: net/http sends 200 with the
		// headers as they stand.
		w.WriteHeader(http.StatusOK)
	}
	header := w.written
	body := w.body.Bytes()
	if _, typed := header["Content-Type"]; !typed && len(body) > 0 {
		// net/http sniffs a missing Content-Type; doing the same keeps the
		// response identical to make dev and decides base64 below. A
		// Content-Type key with no value opts out, as in net/http.
		header.Set("Content-Type", http.DetectContentType(body[:min(len(body), sniffLen)]))
	}
	return NewResponse(w.status, header, body)
}

// NewResponse builds a payload 2.0 response from a status, header and body,
// the way Handler does for what a handler wrote. It is exported for the
// emulator front and for tests of handlers that produce responses directly.
//
// Header values are comma-joined (payload 2.0 has no multi-value headers),
// except Set-Cookie, whose values go to Cookies because joining them would
// break cookies whose Expires attribute contains a comma. CR and LF in
// values become spaces and invalid header names are dropped, as net/http
// does, so a handler cannot split headers or make API Gateway reject the
// response. The body is returned as text only when it is valid UTF-8 and
// the content type is textual and unencoded; anything else is base64 with
// IsBase64Encoded set, so binary bytes survive the JSON round trip.
func NewResponse(status int, header http.Header, body []byte) events.APIGatewayV2HTTPResponse {
	resp := events.APIGatewayV2HTTPResponse{
		StatusCode: status,
		Headers:    make(map[string]string, len(header)),
	}
	// Sorted so that two spellings of one name merge deterministically.
	keys := make([]string, 0, len(header))
	for k := range header {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		if !inbox.ValidHeaderName(k) {
			continue
		}
		name := http.CanonicalHeaderKey(k)
		for _, v := range header[k] {
			v = strings.TrimSpace(headerNewlineToSpace.Replace(v))
			if name == "Set-Cookie" {
				resp.Cookies = append(resp.Cookies, v)
				continue
			}
			if prev, ok := resp.Headers[name]; ok {
				v = prev + "," + v
			}
			resp.Headers[name] = v
		}
	}
	if len(body) == 0 {
		return resp
	}
	if textual(header) && utf8.Valid(body) {
		resp.Body = string(body)
	} else {
		resp.Body = base64.StdEncoding.EncodeToString(body)
		resp.IsBase64Encoded = true
	}
	return resp
}

var headerNewlineToSpace = strings.NewReplacer("\r\n", " ", "\r", " ", "\n", " ")

// textual reports whether the response's content type is one API Gateway
// can carry as a JSON string without loss. A content coding (gzip, br)
// makes any type binary.
func textual(header http.Header) bool {
	if enc := strings.TrimSpace(header.Get("Content-Encoding")); enc != "" && !strings.EqualFold(enc, "identity") {
		return false
	}
	ct := header.Get("Content-Type")
	mediaType, _, err := mime.ParseMediaType(ct)
	if err != nil {
		// Be lenient with malformed parameters; only the type matters here.
		mediaType, _, _ = strings.Cut(ct, ";")
		mediaType = strings.ToLower(strings.TrimSpace(mediaType))
	}
	switch {
	case strings.HasPrefix(mediaType, "text/"),
		mediaType == "application/json",
		strings.HasSuffix(mediaType, "+json"),
		mediaType == "application/xml",
		strings.HasSuffix(mediaType, "+xml"),
		strings.Contains(mediaType, "javascript"),
		mediaType == "application/x-www-form-urlencoded":
		return true
	}
	return false
}

// bodyAllowed reports whether a response with this status may have a body
// (RFC 9110: not 1xx, 204 or 304).
func bodyAllowed(status int) bool {
	switch {
	case status >= 100 && status <= 199:
		return false
	case status == http.StatusNoContent, status == http.StatusNotModified:
		return false
	}
	return true
}
