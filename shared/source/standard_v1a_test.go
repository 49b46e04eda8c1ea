package source

import (
	"bytes"
	"crypto/ed25519"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"math/big"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"

	"github.com/webhook-inbox/webhook-inbox/internal/testkit/field"
	"github.com/webhook-inbox/webhook-inbox/shared/inbox"
)

// Standard Webhooks v1a: ed25519 signatures checked with the sender's
// "whpk_" public keys. The signer in these tests is crypto/ed25519 called
// directly over the spec's signed content, not our Sign: no Standard
// Webhooks library (Go or npm, newest versions checked) signs v1a yet.

// testKey is a deterministic ed25519 key pair, from a seed of one byte
// repeated, so the expected values below never change.
func testKey(b byte) ed25519.PrivateKey {
	return ed25519.NewKeyFromSeed(bytes.Repeat([]byte{b}, ed25519.SeedSize))
}

func whpk(k ed25519.PrivateKey) string {
	return "whpk_" + base64.StdEncoding.EncodeToString(k.Public().(ed25519.PublicKey))
}

func whsk(k ed25519.PrivateKey) string { return "whsk_" + base64.StdEncoding.EncodeToString(k) }

// v1aSign signs as a Standard Webhooks sender does: ed25519 over
// "{webhook-id}.{webhook-timestamp}.{body}", sent as "v1a,<base64>".
func v1aSign(k ed25519.PrivateKey, id string, ts int64, body []byte) string {
	msg := append([]byte(id+"."+strconv.FormatInt(ts, 10)+"."), body...)
	return "v1a," + base64.StdEncoding.EncodeToString(ed25519.Sign(k, msg))
}

func v1aHeaders(id string, ts int64, sig string) http.Header {
	return headers("Webhook-Id", id, "Webhook-Timestamp", strconv.FormatInt(ts, 10), "Webhook-Signature", sig)
}

var (
	keyNew, keyOld, keyOther = testKey(1), testKey(2), testKey(3)
)

const v1aSecret = "whsec_bmV3LXNlY3JldC1rZXktMTIzNDU2LTAx"

// v1aSources: a source with public keys only (two, for rotation), one with
// a secret and a public key (a sender migrating), and one with the other
// key only.
func v1aSources(t *testing.T) (pkOnly, mixed, other *Source) {
	t.Helper()
	set := mustParse(t, `{"sources":{
	 "pk":{"kind":"standard","public_keys":["`+whpk(keyNew)+`","`+whpk(keyOld)+`"]},
	 "mixed":{"kind":"standard","secrets":["`+v1aSecret+`"],"public_keys":["`+whpk(keyNew)+`"]},
	 "other":{"kind":"standard","public_keys":["`+whpk(keyOther)+`"]}}}`)
	pkOnly, _ = set.Lookup("pk")
	mixed, _ = set.Lookup("mixed")
	other, _ = set.Lookup("other")
	return pkOnly, mixed, other
}

func TestStandardV1aVerify(t *testing.T) {
	t.Parallel()
	pk, mixed, other := v1aSources(t)
	body := []byte(`{"type":"user.created","data":{"id":1}}`)
	ts := now.Unix()
	good := v1aSign(keyNew, "msg_1", ts, body)
	v1 := func() string { // the mixed source's own v1 signature
		h, err := mixed.Sign(body, "msg_1", now)
		if err != nil {
			t.Fatal(err)
		}
		return h.Get("Webhook-Signature")
	}
	tests := []struct {
		name string
		src  *Source
		h    http.Header
		body []byte
		at   time.Time
		want inbox.Cause
	}{
		{"v1a accepted", pk, v1aHeaders("msg_1", ts, good), body, now, ""},
		{"rotation: signed by the older public key", pk, v1aHeaders("msg_1", ts, v1aSign(keyOld, "msg_1", ts, body)), body, now, ""},
		{"rotation: the sender signs with an unknown new key and the old one", pk,
			v1aHeaders("msg_1", ts, v1aSign(keyOther, "msg_1", ts, body)+" "+v1aSign(keyOld, "msg_1", ts, body)), body, now, ""},
		{"svix header names", pk, headers("Svix-Id", "msg_1", "Svix-Timestamp", strconv.FormatInt(ts, 10), "Svix-Signature", good), body, now, ""},
		{"wrong key", other, v1aHeaders("msg_1", ts, good), body, now, inbox.CauseSignatureMismatch},
		{"tampered body", pk, v1aHeaders("msg_1", ts, good), []byte(`{"type":"user.deleted","data":{"id":1}}`), now, inbox.CauseSignatureMismatch},
		{"tampered id", pk, v1aHeaders("msg_2", ts, good), body, now, inbox.CauseSignatureMismatch},
		{"tampered timestamp", pk, v1aHeaders("msg_1", ts+1, good), body, now.Add(time.Second), inbox.CauseSignatureMismatch},
		{"id and timestamp shifted across the dot", pk, v1aHeaders("msg", ts, v1aSign(keyNew, "msg.1", ts, body)), []byte("." + string(body)), now, inbox.CauseSignatureMismatch},
		{"stale", pk, v1aHeaders("msg_1", ts-301, v1aSign(keyNew, "msg_1", ts-301, body)), body, now, inbox.CauseTimestampOutOfTolerance},
		{"future", pk, v1aHeaders("msg_1", ts+301, v1aSign(keyNew, "msg_1", ts+301, body)), body, now, inbox.CauseTimestampOutOfTolerance},
		{"at the edge of the tolerance", pk, v1aHeaders("msg_1", ts-300, v1aSign(keyNew, "msg_1", ts-300, body)), body, now, ""},
		{"a v1 signature where only public keys are configured", pk, v1aHeaders("msg_1", ts, v1()), body, now, inbox.CauseSignatureMismatch},
		{"an HMAC sent as v1a", pk, v1aHeaders("msg_1", ts, strings.Replace(v1(), "v1,", "v1a,", 1)), body, now, inbox.CauseSignatureMalformed},
		{"a v1a signature sent as v1", pk, v1aHeaders("msg_1", ts, strings.Replace(good, "v1a,", "v1,", 1)), body, now, inbox.CauseSignatureMalformed},
		{"v1a signature not base64", pk, v1aHeaders("msg_1", ts, "v1a,not base64!"), body, now, inbox.CauseSignatureMalformed},
		{"v1a signature truncated", pk, v1aHeaders("msg_1", ts, good[:len(good)-8]), body, now, inbox.CauseSignatureMalformed},
		{"v1a signature of all zeros", pk, v1aHeaders("msg_1", ts, "v1a,"+base64.StdEncoding.EncodeToString(make([]byte, 64))), body, now, inbox.CauseSignatureMismatch},
		{"too many v1a entries, the good one last", pk, v1aHeaders("msg_1", ts,
			strings.Repeat(v1aSign(keyOther, "msg_1", ts, body)+" ", MaxStandardAsymmetricSignatures)+good), body, now, inbox.CauseSignatureMalformed},
		{"as many v1a entries as allowed, the good one last", pk, v1aHeaders("msg_1", ts,
			strings.Repeat(v1aSign(keyOther, "msg_1", ts, body)+" ", MaxStandardAsymmetricSignatures-1)+good), body, now, ""},
		// Mixed headers: a sender migrating from v1 to v1a sends both.
		{"mixed header, both good", mixed, v1aHeaders("msg_1", ts, v1()+" "+good), body, now, ""},
		{"mixed header, v1 good, v1a by another key", mixed, v1aHeaders("msg_1", ts, v1()+" "+v1aSign(keyOther, "msg_1", ts, body)), body, now, ""},
		{"mixed header, v1 forged, v1a good", mixed, v1aHeaders("msg_1", ts, "v1,"+strings.Repeat("A", 43)+"= "+good), body, now, ""},
		{"mixed header, v1a first, repeated header", mixed, func() http.Header {
			h := v1aHeaders("msg_1", ts, good)
			h.Add("Webhook-Signature", "v1,"+strings.Repeat("A", 43)+"=")
			return h
		}(), body, now, ""},
		{"mixed header, both forged", mixed, v1aHeaders("msg_1", ts, "v1,"+strings.Repeat("A", 43)+"= "+v1aSign(keyOther, "msg_1", ts, body)), body, now, inbox.CauseSignatureMismatch},
		{"mixed source, only v1a", mixed, v1aHeaders("msg_1", ts, good), body, now, ""},
		{"mixed source, only v1", mixed, v1aHeaders("msg_1", ts, v1()), body, now, ""},
		{"unknown versions beside a good v1a", pk, v1aHeaders("msg_1", ts, "v2,abc v1b,"+good[4:]+" "+good), body, now, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			id, err := tt.src.Verifier.Verify(tt.h, tt.body, tt.at)
			wantCause(t, err, tt.want)
			if tt.want == "" && (id.EventID != "msg_1" || id.EventType != "user.created") {
				t.Fatalf("identity = %+v", id)
			}
		})
	}
}

// Bad configurations stop the start, naming the source and the field, and
// never print a private key.
func TestStandardV1aConfig(t *testing.T) {
	t.Parallel()
	k := keyNew
	pub := k.Public().(ed25519.PublicKey)
	b64 := base64.StdEncoding.EncodeToString
	identity := make([]byte, 32)
	identity[0] = 1
	tests := []struct {
		name, options, field, want string
	}{
		{"neither secrets nor public keys", `"type_field":"type"`, "secrets", "public_keys"},
		{"empty lists", `"secrets":[],"public_keys":[]`, "secrets", "public_keys"},
		{"public key of 31 bytes", `"public_keys":["whpk_` + b64(pub[:31]) + `"]`, "public_keys", "public key #1 decodes to 31 bytes"},
		{"public key of 33 bytes", `"public_keys":["` + whpk(keyOld) + `","whpk_` + b64(append(bytes.Clone(pub), 0)) + `"]`, "public_keys", "public key #2 decodes to 33 bytes"},
		{"public key not base64", `"public_keys":["whpk_***"]`, "public_keys", "base64"},
		{"public key URL-safe base64", `"public_keys":["whpk_` + base64.URLEncoding.EncodeToString(bytes.Repeat([]byte{0xfb}, 32)) + `"]`, "public_keys", "base64"},
		{"empty public key", `"public_keys":[""]`, "public_keys", "empty"},
		{"a private key in public_keys", `"public_keys":["` + whsk(k) + `"]`, "public_keys", "whsk_ private key"},
		{"a whsec_ secret in public_keys", `"public_keys":["` + v1aSecret + `"]`, "public_keys", "belongs in secrets"},
		{"the identity point", `"public_keys":["whpk_` + b64(identity) + `"]`, "public_keys", "small order"},
		{"signing key without its public key", `"public_keys":["` + whpk(keyOld) + `"],"signing_key":"` + whsk(k) + `"`, "signing_key", whpk(k)},
		{"signing key that is a public key", `"public_keys":["` + whpk(k) + `"],"signing_key":"` + whpk(k) + `"`, "signing_key", "whsk_-prefixed"},
		{"signing key of 48 bytes", `"public_keys":["` + whpk(k) + `"],"signing_key":"whsk_` + b64(k[:48]) + `"`, "signing_key", "48 bytes"},
		{"signing key pair inconsistent", `"public_keys":["` + whpk(k) + `"],"signing_key":"whsk_` + b64(append(bytes.Clone(k[:32]), keyOld[32:]...)) + `"`, "signing_key", "inconsistent"},
		{"misspelt field", `"public_key":["` + whpk(k) + `"]`, "", "public_key"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, err := Parse([]byte(`{"sources":{"billing":{"kind":"standard",` + tt.options + `}}}`))
			if err == nil {
				t.Fatal("accepted")
			}
			msg := err.Error()
			if !strings.Contains(msg, `source "billing"`) || (tt.field != "" && !strings.Contains(msg, `field "`+tt.field+`"`)) || !strings.Contains(msg, tt.want) {
				t.Fatalf("error %q; want it to name the source, field %q and say %q", msg, tt.field, tt.want)
			}
			for _, secret := range []string{b64(k), b64(k[:32]), b64(k[:48]), v1aSecret} {
				if strings.Contains(msg, secret) {
					t.Fatalf("the error prints a secret: %q", msg)
				}
			}
		})
	}

	// Accepted: without the whpk_ prefix; a seed as signing key; secrets
	// and public keys together.
	for _, opts := range []string{
		`"public_keys":["` + b64(pub) + `"]`,
		`"public_keys":["` + whpk(k) + `"],"signing_key":"whsk_` + b64(k.Seed()) + `"`,
		`"public_keys":["` + whpk(k) + `"],"signing_key":"` + whsk(k) + `"`,
		`"secrets":["` + v1aSecret + `"],"public_keys":["` + whpk(k) + `"]`,
		`"secrets":[],"public_keys":["` + whpk(k) + `"]`,
	} {
		if _, err := Parse([]byte(`{"sources":{"billing":{"kind":"standard",` + opts + `}}}`)); err != nil {
			t.Errorf("%s: %v", opts, err)
		}
	}
}

// smallOrderEncodings are the canonical encodings of the eight points of
// small order, built from smallOrderY with both signs of x where x is not 0.
func smallOrderEncodings() [][]byte {
	var out [][]byte
	for i, y := range smallOrderY {
		le := y.FillBytes(make([]byte, 32))
		slices.Reverse(le)
		out = append(out, le)
		if i >= 2 { // y = 0 and the order-8 pair have x != 0: both signs
			neg := bytes.Clone(le)
			neg[31] |= 0x80
			out = append(out, neg)
		}
	}
	return out
}

// The keys refused as small-order are exactly those under which forged
// signatures verify: crypto/ed25519 itself accepts (R, S=0), R one of the
// small-order points, whenever R = -[k]A with k = H(R || A || msg), which
// happens for about one message in eight, whoever signs. So the list in
// standard.go is right, and refusing these keys closes a real hole. A real
// key, and non-canonical encodings of the same points, are checked too.
func TestStandardSmallOrderPublicKeys(t *testing.T) {
	t.Parallel()
	points := smallOrderEncodings()
	if len(points) != 8 {
		t.Fatalf("%d small-order encodings, want 8", len(points))
	}
	// forgeries counts the messages out of 64 for which a forged signature
	// verifies under key.
	forgeries := func(key []byte) int {
		n := 0
		for i := range 64 {
			msg := []byte(fmt.Sprintf("msg_%d.1700000000.{}", i))
			for _, r := range points {
				if ed25519.Verify(key, msg, append(bytes.Clone(r), make([]byte, 32)...)) {
					n++
					break
				}
			}
		}
		return n
	}
	for i, key := range points {
		if !smallOrderPoint(key) {
			t.Errorf("point %d (%x) is not refused", i, key)
		}
		if n := forgeries(key); n == 0 {
			t.Errorf("point %d (%x): no forgery verifies for 64 messages: is it of small order?", i, key)
		}
	}
	// Non-canonical: y + p still fits in 255 bits for y < 19.
	for _, y := range []int64{0, 1} {
		nc := new(big.Int).Add(fieldP, big.NewInt(y)).FillBytes(make([]byte, 32))
		slices.Reverse(nc)
		if !smallOrderPoint(nc) {
			t.Errorf("non-canonical y = p+%d is not refused", y)
		}
	}
	for _, k := range []ed25519.PrivateKey{keyNew, keyOld, keyOther} {
		pub := k.Public().(ed25519.PublicKey)
		if smallOrderPoint(pub) || forgeries(pub) != 0 {
			t.Errorf("a real key %x is refused or forgeable", pub)
		}
	}
}

// Signing: a source with public keys only cannot sign and says what to
// configure; a signing_key signs v1a (checked with crypto/ed25519 alone),
// beside v1 when the source has a secret too; holding one is a warning.
func TestStandardV1aSigning(t *testing.T) {
	t.Parallel()
	pk, _, _ := v1aSources(t)
	if _, err := pk.Sign([]byte(`{}`), "msg_1", now); err == nil || !strings.Contains(err.Error(), "signing_key") || !strings.Contains(err.Error(), "source pk") {
		t.Fatalf("Sign on a public-keys-only source: %v; want an error naming the source and signing_key", err)
	}
	if _, err := pk.Sample(now); err != nil {
		t.Fatalf("Sample: %v (a sample needs no key; signing it does)", err)
	}
	if pk.Warning != "" {
		t.Fatalf("public keys only: warning %q", pk.Warning)
	}

	set := mustParse(t, `{"sources":{
	 "dev":{"kind":"standard","public_keys":["`+whpk(keyOld)+`","`+whpk(keyNew)+`"],"signing_key":"`+whsk(keyNew)+`"},
	 "both":{"kind":"standard","secrets":["`+v1aSecret+`"],"public_keys":["`+whpk(keyNew)+`"],"signing_key":"whsk_`+base64.StdEncoding.EncodeToString(keyNew.Seed())+`"}}}`)
	body := []byte(`{"type":"invoice.paid"}`)
	for _, name := range []string{"dev", "both"} {
		src, _ := set.Lookup(name)
		if !strings.Contains(src.Warning, "signing_key") || !strings.Contains(src.Warning, "development") {
			t.Fatalf("%s: warning %q; want one about the private key", name, src.Warning)
		}
		h, err := src.Sign(body, "msg_dev_1", now)
		if err != nil {
			t.Fatal(err)
		}
		entries := strings.Fields(h.Get("Webhook-Signature"))
		wantV1a := v1aSign(keyNew, "msg_dev_1", now.Unix(), body) // ed25519 is deterministic
		if !slices.Contains(entries, wantV1a) {
			t.Fatalf("%s: signature %q lacks the v1a entry %q", name, entries, wantV1a)
		}
		if hasV1 := slices.ContainsFunc(entries, func(e string) bool { return strings.HasPrefix(e, "v1,") }); hasV1 != (name == "both") {
			t.Fatalf("%s: entries %q", name, entries)
		}
		if _, err := src.Verifier.Verify(h, body, now); err != nil {
			t.Fatalf("%s: own signature refused: %v", name, err)
		}
	}
}

// Interop with the standard-webhooks Go library (the newest release, like
// the npm package's, implements v1 only): a header carrying our v1a entry
// beside v1 still verifies in the library, which skips the version it does
// not know; and the library's v1 signature with a v1a entry appended
// verifies here against either the secret or the public key.
func TestStandardV1aBesideTheLibrary(t *testing.T) {
	t.Parallel()
	set := mustParse(t, `{"sources":{
	 "both":{"kind":"standard","secrets":["`+v1aSecret+`"],"public_keys":["`+whpk(keyNew)+`"],"signing_key":"`+whsk(keyNew)+`"},
	 "pk":{"kind":"standard","public_keys":["`+whpk(keyNew)+`"]}}}`)
	both, _ := set.Lookup("both")
	pk, _ := set.Lookup("pk")
	body := []byte(`{"type":"invoice.paid","data":{"note":"<b>é</b>"}}`)

	h, err := both.Sign(body, "msg_ours_1", now)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(h.Get("Webhook-Signature"), "v1a,") {
		t.Fatalf("no v1a entry: %q", h.Get("Webhook-Signature"))
	}
	wh, err := standardwebhooks.NewWebhook(v1aSecret)
	if err != nil {
		t.Fatal(err)
	}
	if err := wh.VerifyIgnoringTimestamp(body, h); err != nil {
		t.Fatalf("the library refuses a v1 signature beside a v1a one: %v", err)
	}

	sig, err := wh.Sign("msg_lib_1", now, body)
	if err != nil {
		t.Fatal(err)
	}
	sig += " " + v1aSign(keyNew, "msg_lib_1", now.Unix(), body)
	for _, src := range []*Source{both, pk} {
		id, err := src.Verifier.Verify(v1aHeaders("msg_lib_1", now.Unix(), sig), body, now)
		if err != nil || id.EventID != "msg_lib_1" || id.EventType != "invoice.paid" {
			t.Fatalf("%s: %+v, %v", src.Name, id, err)
		}
	}
}

// The specification's own example header (v1 and v1a together) parses
// into one v1 and one v1a entry. It publishes neither the body nor the
// keys, so it is no vector: only the parsing is checked.
func TestStandardSpecExampleHeaderParses(t *testing.T) {
	t.Parallel()
	v1, v1a := parseStandardSignatures("v1,K5oZfzN95Z9UVu1EsfQmfVNQhnkZ2pj9o9NDN/H/pI4= v1a,hnO3f9T8Ytu9HwrXslvumlUpqtNVqkhqw/enGzPCXe5BdqzCInXqYXFymVJaA7AZdpXwVLPo3mNl8EM+m7TBAg==")
	if len(v1) != 1 || len(v1a) != 1 {
		t.Fatalf("v1 %d, v1a %d signatures, want 1 each", len(v1), len(v1a))
	}
	if !field.Check(t, "signature lengths",
		field.Eq("v1", len(v1[0]), 32),
		field.Eq("v1a", len(v1a[0]), 64),
	) {
		t.FailNow()
	}
}

// FuzzStandardV1aVerify: a source with a public key only (its signing_key
// signs the round trip) under arbitrary headers, and an arbitrary string as
// a configured public key: the configuration is refused with the source
// named, or it verifies without panicking and with a verifier cause.
func FuzzStandardV1aVerify(f *testing.F) {
	// One public key: each check is an ed25519 verification, thousands of
	// times slower than an HMAC; rotation is TestStandardV1aVerify's.
	src := fuzzSource(f, `{"sources":{"a":{"kind":"standard","public_keys":["`+whpk(keyNew)+`"],"signing_key":"`+whsk(keyNew)+`"}}}`, "a")
	body := []byte(`{"type":"a"}`)
	f.Add(body, "msg_1", strconv.FormatInt(now.Unix(), 10), v1aSign(keyNew, "msg_1", now.Unix(), body), whpk(keyNew), int64(0), uint(0))
	f.Add(body, "msg_1", "1700000000", v1aSign(keyOld, "msg_1", now.Unix(), body)+" v1,AAAA v1a,", "whpk_AQAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=", int64(-400), uint(9))
	f.Add([]byte{}, "", "-5", "v1a,"+strings.Repeat("A", 86)+"==", whsk(keyOld), int64(301), uint(2))
	f.Fuzz(func(t *testing.T, body []byte, msgID, ts, sig, publicKey string, skew int64, flip uint) {
		h := http.Header{"Webhook-Id": {msgID}, "Webhook-Timestamp": {ts}, "Webhook-Signature": {sig}}
		id, err := src.Verifier.Verify(h, body, now)
		checkOutcome(t, "arbitrary headers", id, err)
		fuzzRoundTrip(t, src, body, msgID, "", flip, skew, DefaultTolerance)

		key, err := json.Marshal(publicKey)
		if err != nil {
			return
		}
		set, err := Parse([]byte(fmt.Sprintf(`{"sources":{"f":{"kind":"standard","public_keys":[%s]}}}`, key)))
		if err != nil {
			if !strings.Contains(err.Error(), `source "f": field "public_keys"`) {
				t.Fatalf("refusal without the source and field: %v", err)
			}
			return
		}
		fsrc, _ := set.Lookup("f")
		id, err = fsrc.Verifier.Verify(h, body, now)
		checkOutcome(t, "arbitrary public key", id, err)
		if _, err := fsrc.Sign(body, msgID, now); err == nil {
			t.Fatal("a source with a public key only signed")
		}
	})
}
