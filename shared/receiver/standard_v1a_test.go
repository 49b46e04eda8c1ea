package receiver_test

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"encoding/base64"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"

	"github.com/webhook-inbox/webhook-inbox/internal/testkit/field"
	"github.com/webhook-inbox/webhook-inbox/internal/testkit/pgtest"
	"github.com/webhook-inbox/webhook-inbox/shared/inbox"
	"github.com/webhook-inbox/webhook-inbox/shared/receiver"
	"github.com/webhook-inbox/webhook-inbox/shared/source"
)

// Standard Webhooks v1a through the real receiver and Postgres: a sender
// that signs only with ed25519 is stored once, and whatever does not carry
// its signature is refused, recorded with the verifier's cause, and stores
// nothing. The receiver holds the public keys only.

func v1aKey(b byte) ed25519.PrivateKey {
	return ed25519.NewKeyFromSeed(bytes.Repeat([]byte{b}, ed25519.SeedSize))
}

func v1aPublic(k ed25519.PrivateKey) string {
	return "whpk_" + base64.StdEncoding.EncodeToString(k.Public().(ed25519.PublicKey))
}

// v1aRequest is a delivery signed the way a Standard Webhooks sender signs
// v1a, with crypto/ed25519 over "{id}.{timestamp}.{body}".
func v1aRequest(k ed25519.PrivateKey, name, id string, ts int64, body []byte) *http.Request {
	tsRaw := strconv.FormatInt(ts, 10)
	sig := ed25519.Sign(k, append([]byte(id+"."+tsRaw+"."), body...))
	r := httptest.NewRequest(http.MethodPost, "/webhooks/"+name, bytes.NewReader(body))
	r.Header.Set("Content-Type", "application/json")
	r.Header.Set("Webhook-Id", id)
	r.Header.Set("Webhook-Timestamp", tsRaw)
	r.Header.Set("Webhook-Signature", "v1a,"+base64.StdEncoding.EncodeToString(sig))
	return r
}

func TestStandardV1aThroughTheReceiver(t *testing.T) {
	t.Parallel()
	sender, rotatedOut, stranger := v1aKey(11), v1aKey(12), v1aKey(13)
	sources, err := source.Parse([]byte(`{"sources":{"asym":{"kind":"standard","public_keys":["` +
		v1aPublic(sender) + `","` + v1aPublic(rotatedOut) + `"]}}}`))
	if err != nil {
		t.Fatal(err)
	}
	f := setupOn(t, pgtest.Pool(t), receiver.Config{}, receiver.Deps{Sources: sources})
	body := []byte(`{"type":"invoice.paid","data":{"invoice":"in_1"}}`)
	ts := now.Unix()

	a := f.do(v1aRequest(sender, "asym", "msg_v1a_1", ts, body))
	if a.Code != 200 || a.Status != "accepted" {
		t.Fatalf("v1a delivery: %+v", a)
	}
	ev, err := f.store.EventGetByID(context.Background(), a.ID)
	if err != nil {
		t.Fatal(err)
	}
	field.Must(t, "stored", field.Printed("EventID", ev.EventID, "msg_v1a_1"), field.Printed("Type", ev.Type, "invoice.paid"),
		field.Printed("SourceKind", ev.SourceKind, source.KindStandard), field.Printed("Body", string(ev.Body), string(body)))
	// A retry (same id, new timestamp, new signature) is a duplicate.
	if d := f.do(v1aRequest(sender, "asym", "msg_v1a_1", ts+60, body)); d.Code != 200 || d.Status != "duplicate" {
		t.Fatalf("retry: %+v", d)
	}
	// Signed by the second configured key (rotation): a new event.
	if r := f.do(v1aRequest(rotatedOut, "asym", "msg_v1a_2", ts, body)); r.Code != 200 || r.Status != "accepted" {
		t.Fatalf("second key: %+v", r)
	}

	refused := []struct {
		name  string
		req   func() *http.Request
		cause inbox.Cause
	}{
		{"another key", func() *http.Request { return v1aRequest(stranger, "asym", "msg_v1a_3", ts, body) }, inbox.CauseSignatureMismatch},
		{"tampered body", func() *http.Request {
			r := v1aRequest(sender, "asym", "msg_v1a_4", ts, body)
			r.Body = readCloser(bytes.Replace(body, []byte("in_1"), []byte("in_2"), 1))
			return r
		}, inbox.CauseSignatureMismatch},
		{"tampered id", func() *http.Request {
			r := v1aRequest(sender, "asym", "msg_v1a_5", ts, body)
			r.Header.Set("Webhook-Id", "msg_v1a_6")
			return r
		}, inbox.CauseSignatureMismatch},
		{"tampered timestamp", func() *http.Request {
			r := v1aRequest(sender, "asym", "msg_v1a_7", ts, body)
			r.Header.Set("Webhook-Timestamp", strconv.FormatInt(ts-1, 10))
			return r
		}, inbox.CauseSignatureMismatch},
		{"stale", func() *http.Request { return v1aRequest(sender, "asym", "msg_v1a_8", ts-3600, body) }, inbox.CauseTimestampOutOfTolerance},
		{"forged v1 only", func() *http.Request {
			r := v1aRequest(sender, "asym", "msg_v1a_9", ts, body)
			r.Header.Set("Webhook-Signature", "v1,"+strings.Repeat("A", 43)+"=")
			return r
		}, inbox.CauseSignatureMismatch},
		{"more v1a entries than checked", func() *http.Request {
			r := v1aRequest(sender, "asym", "msg_v1a_10", ts, body)
			good := r.Header.Get("Webhook-Signature")
			r.Header.Set("Webhook-Signature", strings.Repeat(good+" ", source.MaxStandardAsymmetricSignatures)+good)
			return r
		}, inbox.CauseSignatureMalformed},
	}
	for _, tt := range refused {
		a := f.do(tt.req())
		if a.Code != 401 || a.Cause != inbox.CauseUnauthenticated || a.Status != "rejected" {
			t.Fatalf("%s: %+v, want 401 unauthenticated", tt.name, a)
		}
	}
	if n := f.count(); n != 2 {
		t.Fatalf("%d events stored, want 2", n)
	}
	// Each refusal is recorded with the verifier's own cause (the sampler
	// writes one record per source and cause, counting the others).
	want := map[inbox.Cause]int64{}
	for _, tt := range refused {
		want[tt.cause]++
	}
	got := map[inbox.Cause]int64{}
	for _, r := range f.rejections(len(want)) {
		if r.Source == "asym" {
			got[r.Cause] += 1 + r.Suppressed
		}
	}
	for c := range want {
		if got[c] < 1 || got[c] > want[c] {
			t.Errorf("cause %s: %d refusals recorded, want 1..%d; all: %v", c, got[c], want[c], got)
		}
	}
}
