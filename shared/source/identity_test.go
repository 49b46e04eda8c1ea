package source

import (
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/webhook-inbox/webhook-inbox/shared/inbox"
)

func TestPathString(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, body, path, want string
		cause                  inbox.Cause
	}{
		{"top level", `{"id":"a"}`, "id", "a", ""},
		{"nested", `{"data":{"object":{"id":"in_1"}}}`, "data.object.id", "in_1", ""},
		{"escapes decoded", `{"id":"\u00e9\u003c"}`, "id", "é<", ""},
		{"leading whitespace", " \n{\"id\":\"a\"}", "id", "a", ""},
		{"whitespace everywhere", " { \"data\" :\n { \"id\" : \"a\" } } ", "data.id", "a", ""},
		{"absent", `{"other":"a"}`, "id", "", ""},
		{"null", `{"id":null}`, "id", "", ""},
		{"intermediate null", `{"data":null}`, "data.id", "", ""},
		{"intermediate string", `{"data":"x"}`, "data.id", "", ""},
		{"intermediate array", `{"data":[{"id":"a"}]}`, "data.id", "", ""},
		{"number", `{"id":1}`, "id", "", inbox.CauseUnparsableBody},
		{"object", `{"id":{}}`, "id", "", inbox.CauseUnparsableBody},
		{"invalid UTF-8", "{\"id\":\"a\xffb\"}", "id", "", inbox.CauseUnparsableBody},
		{"not JSON", `id=1`, "id", "", inbox.CauseUnparsableBody},
		{"array body", `[{"id":"a"}]`, "id", "", inbox.CauseUnparsableBody},
		{"truncated", `{"id":"a"`, "id", "", inbox.CauseUnparsableBody},
		{"trailing garbage", `{"id":"a"} x`, "id", "", inbox.CauseUnparsableBody},
		{"empty", ``, "id", "", inbox.CauseUnparsableBody},
		{"duplicate keys: the last wins, as in PostgreSQL's jsonb", `{"id":"a","id":"b"}`, "id", "b", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			keys, err := parseJSONPath(tt.path)
			if err != nil {
				t.Fatal(err)
			}
			got, err := pathString([]byte(tt.body), keys)
			wantCause(t, err, tt.cause)
			if got != tt.want {
				t.Fatalf("got %q, want %q", got, tt.want)
			}
			// A one-key path reads what bodyFields reads.
			if len(keys) == 1 {
				f, ferr := bodyFields([]byte(tt.body), keys[0])
				if inbox.CauseOf(ferr) != inbox.CauseOf(err) && (ferr != nil || err != nil) {
					t.Fatalf("bodyFields error %v, pathString error %v", ferr, err)
				}
				if ferr == nil && f[keys[0]] != got {
					t.Fatalf("bodyFields %q, pathString %q", f[keys[0]], got)
				}
			}
		})
	}
}

// The same event delivered to two sources (say, one Stripe account sending
// to two endpoints configured as two sources) verifies on both with the
// same identity: they are different sources, so both are kept (the dedup
// key is (source, event id), stored as (provider, event_id)).
func TestSameEventTwoSources(t *testing.T) {
	t.Parallel()
	set := mustParse(t, `{"sources":{"billing":{"kind":"stripe","secrets":["whsec_shared_0123456789abcdefg"]},"analytics":{"kind":"stripe","secrets":["whsec_shared_0123456789abcdefg"]}}}`)
	body := fixture(t, "stripe_invoice_paid.json")
	h := http.Header{"Stripe-Signature": {stripeHeader("whsec_shared_0123456789abcdefg", now.Unix(), string(body))}}
	var ids []inbox.Identity
	for _, name := range []string{"billing", "analytics"} {
		src, _ := set.Lookup(name)
		id, err := src.Verifier.Verify(h, body, now)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		ids = append(ids, id)
	}
	if ids[0].EventID != ids[1].EventID || ids[0].EventID != "evt_1PqAbCDeFgHiJkLm" {
		t.Fatalf("identities %+v", ids)
	}
}

func TestNewKindsParseErrors(t *testing.T) {
	t.Parallel()
	tests := []struct{ name, doc, want string }{
		{"github without secrets", `{"sources":{"g":{"kind":"github"}}}`, `source "g": field "secrets"`},
		{"github with a tolerance (it signs no timestamp)", `{"sources":{"g":{"kind":"github","secrets":["s_0123456789abcd"],"tolerance_seconds":60}}}`, `source "g": json: unknown field "tolerance_seconds"`},
		{"shopify with a blank secret", `{"sources":{"s":{"kind":"shopify","secrets":[""]}}}`, `source "s": field "secrets": secret #1 is empty`},
		{"square without a URL", `{"sources":{"q":{"kind":"square","secrets":["k_0123456789abcd"]}}}`, `source "q": field "notification_url": is required`},
		{"square misspelt URL field", `{"sources":{"q":{"kind":"square","secrets":["k_0123456789abcd"],"notification_uri":"https://x"}}}`, `unknown field "notification_uri"`},
		{"unknown kind lists the kinds", `{"sources":{"x":{"kind":"paypal","secrets":["k"]}}}`, fmt.Sprint(Kinds())},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, err := Parse([]byte(tt.doc))
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("Parse error = %v, want it to contain %q", err, tt.want)
			}
		})
	}
}

// An id or type with a C0, DEL or C1 control character is refused at
// receipt, with the cause a sender can search for.
func TestIdentityRefusesControls(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name  string
		id    inbox.Identity
		cause inbox.Cause
	}{
		{"ESC in id", inbox.Identity{EventID: "evt_\x1b[2J"}, inbox.CauseMissingEventID},
		{"DEL in id", inbox.Identity{EventID: "evt_\x7f"}, inbox.CauseMissingEventID},
		{"C1 CSI in id", inbox.Identity{EventID: "evt_\u009b2J"}, inbox.CauseMissingEventID},
		{"C1 OSC in type", inbox.Identity{EventID: "evt_1", EventType: "push\u009d52;c;aGk=\u009c"}, inbox.CauseInvalidEventType},
	} {
		if _, err := checkIdentity(tt.id); inbox.CauseOf(err) != tt.cause {
			t.Errorf("%s: err = %v, want cause %s", tt.name, err, tt.cause)
		}
	}
	if _, err := checkIdentity(inbox.Identity{EventID: "évt_ü_1", EventType: "commande.créée"}); err != nil {
		t.Fatalf("accented text refused: %v", err)
	}
}
