package source

import (
	"strings"
	"testing"

	"github.com/webhook-inbox/webhook-inbox/shared/inbox"
)

// shiftDoc signs "{id}.{body}": the id header next to the body, '.'
// between them.
const shiftDoc = `{"sources":{"h":{"kind":"hmac","secrets":["shift-secret-0123456789"],"signature_header":"X-Sig",
 "signed_content":"{id}.{body}","event_id":{"header":"X-Event-Id"}}}}`

// The id/body shift: one captured delivery signed over
// "{id}.{body}" must not verify with bytes moved from the body into the
// id: the shifted delivery is refused, since its id holds the delimiter.
func TestHMACIDBodyShiftIsRefused(t *testing.T) {
	t.Parallel()
	src := lookup(t, shiftDoc, "h")
	body := []byte(`x.{"amount":100}`)
	signed, err := src.Sign(body, "evt_1", now)
	if err != nil {
		t.Fatal(err)
	}
	if id, err := src.Verifier.Verify(signed, body, now); err != nil || id.EventID != "evt_1" {
		t.Fatalf("the captured delivery: %+v, %v", id, err)
	}
	// The same signature: "evt_1" + "." + `x.{...}` == "evt_1.x" + "." + `{...}`.
	shifted := signed.Clone()
	shifted.Set("X-Event-Id", "evt_1.x")
	id, err := src.Verifier.Verify(shifted, []byte(`{"amount":100}`), now)
	if inbox.CauseOf(err) != inbox.CauseSignatureMalformed {
		t.Fatalf("the shifted delivery: %+v, %v; want signature_malformed", id, err)
	}
	if !strings.Contains(err.Error(), `"."`) {
		t.Fatalf("the refusal does not name the delimiter: %v", err)
	}
	if src.Note == "" || !strings.Contains(src.Note, `{id}.{body}`) {
		t.Fatalf("Note = %q, want the template's rule", src.Note)
	}
}

// A signed timestamp is digits only: ParseInt's leading '+' would give a
// second spelling of one time, a byte the split cannot tell apart.
func TestHMACTimestampIsDigitsOnly(t *testing.T) {
	t.Parallel()
	src := lookup(t, hmacDoc, "h")
	body := []byte(`{"meta":{"event":{"id":"e1","kind":"k"}}}`)
	h, err := src.Sign(body, "e1", now)
	if err != nil {
		t.Fatal(err)
	}
	h.Set("X-Timestamp", "+"+h.Get("X-Timestamp"))
	if _, err := src.Verifier.Verify(h, body, now); inbox.CauseOf(err) != inbox.CauseSignatureMalformed {
		t.Fatalf("a signed '+' timestamp: %v, want signature_malformed", err)
	}
}

// Templates whose parts could trade bytes are refused at start-up, naming
// the source and the template; unambiguous ones are accepted.
func TestHMACAmbiguousTemplates(t *testing.T) {
	t.Parallel()
	doc := func(tmpl string) string {
		return `{"sources":{"acme":{"kind":"hmac","secrets":["k_0123456789abcd"],"signature_header":"X-Sig","timestamp_header":"X-Ts",
		 "signed_content":"` + tmpl + `","event_id":{"header":"X-Id"}}}}`
	}
	for _, tmpl := range []string{
		"{timestamp}{id}{body}", "{id}{timestamp}.{body}", "{timestamp}{body}{id}", "{timestamp}.{id}{body}",
		"{timestamp}.{body}{id}", "{timestamp}1{body}", "{timestamp}.{id}a{body}", "{body}5{timestamp}", "{body}.{id}{timestamp}",
	} {
		_, err := Parse([]byte(doc(tmpl)))
		if err == nil || !strings.Contains(err.Error(), `source "acme"`) || !strings.Contains(err.Error(), `"`+tmpl+`" is ambiguous`) {
			t.Errorf("%s: %v, want a refusal naming the source and the template", tmpl, err)
		}
	}
	for tmpl, note := range map[string]string{
		"{id}.{timestamp}.{body}": `"."`, "{id}:{timestamp}:{body}": `":"`,
		"{timestamp}.{body}.{id}": `"."`, "v0:{timestamp}\\n{id}|{body}": `"|"`, "{body}#{id}-{timestamp}": `"#"`,
	} {
		set, err := Parse([]byte(doc(tmpl)))
		if err != nil {
			t.Errorf("%s: %v", tmpl, err)
			continue
		}
		src, _ := set.Lookup("acme")
		if !strings.Contains(src.Note, note) {
			t.Errorf("%s: note %q, want one naming %s", tmpl, src.Note, note)
		}
	}
}
