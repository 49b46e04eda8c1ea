package source

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/webhook-inbox/webhook-inbox/shared/inbox"
)

// KindStripe is Stripe's scheme: Stripe-Signature: t=<unix>,v1=<hex>[,v1=...]
// where each v1 is HMAC-SHA256("{t}.{body}") keyed with the endpoint secret.
const KindStripe = "stripe"

func init() { register(KindStripe, newStripe) }

// stripeOptions is the JSON configuration of a stripe source.
type stripeOptions struct {
	Kind             string   `json:"kind"`
	Secrets          []string `json:"secrets"`
	ToleranceSeconds *int     `json:"tolerance_seconds"`
}

type stripeVerifier struct {
	secrets [][]byte
	tol     time.Duration
}

func newStripe(name string, raw json.RawMessage) (kindVerifier, error) {
	var o stripeOptions
	if err := decodeOptions(name, raw, &o); err != nil {
		return nil, err
	}
	secrets, err := secretList(name, o.Secrets)
	if err != nil {
		return nil, err
	}
	tol, err := toleranceOption(name, o.ToleranceSeconds, DefaultTolerance)
	if err != nil {
		return nil, err
	}
	v := &stripeVerifier{tol: tol}
	for i, s := range secrets {
		rest, ok := strings.CutPrefix(s, "whsec_")
		if !ok {
			return nil, fieldError(name, "secrets", "secret #%d does not start with whsec_ (Stripe's endpoint secrets all do)", i+1)
		}
		if len(rest) < MinStripeSecretChars {
			return nil, fieldError(name, "secrets", "secret #%d has %d characters after whsec_; at least %d are required (a real secret is longer: copy it whole)", i+1, len(rest), MinStripeSecretChars)
		}
		// Stripe keys the HMAC with the whole secret string, prefix included.
		v.secrets = append(v.secrets, []byte(s))
	}
	return v, nil
}

func (v *stripeVerifier) Verify(h http.Header, body []byte, now time.Time) (inbox.Identity, error) {
	header, ok := headerValue(h, "Stripe-Signature")
	if !ok || strings.TrimSpace(header) == "" {
		return inbox.Identity{}, inbox.Errorf(inbox.CauseSignatureMissing, "the Stripe-Signature header is missing")
	}
	ts, sigs, err := parseStripeHeader(header)
	if err != nil {
		return inbox.Identity{}, err
	}
	tsText := strconv.FormatInt(ts, 10)
	matched := matchAnyOf(v.secrets, sha256.New, sigs, func(w io.Writer) {
		io.WriteString(w, tsText+".")
		w.Write(body)
	})
	if !matched {
		return inbox.Identity{}, inbox.Errorf(inbox.CauseSignatureMismatch, "no v1 signature matches a configured secret")
	}
	if !withinTolerance(time.Unix(ts, 0), now, v.tol) {
		return inbox.Identity{}, inbox.Errorf(inbox.CauseTimestampOutOfTolerance, "the signed timestamp is more than %s away from now", v.tol)
	}
	f, err := bodyFields(body, "id", "type")
	if err != nil {
		return inbox.Identity{}, err
	}
	return checkIdentity(inbox.Identity{EventID: f["id"], EventType: f["type"]})
}

// parseStripeHeader reads t and the v1 signatures. Other schemes (v0, the
// test-mode scheme) are ignored, as Stripe's own libraries do. Exactly one
// t is required: two would let an attacker pair a fresh t with an old body.
func parseStripeHeader(header string) (int64, [][]byte, error) {
	var (
		ts    int64
		haveT bool
		sigs  [][]byte
	)
	for _, part := range strings.Split(header, ",") {
		k, val, ok := strings.Cut(strings.TrimSpace(part), "=")
		if !ok {
			return 0, nil, inbox.Errorf(inbox.CauseSignatureMalformed, "the Stripe-Signature header has an item without '='")
		}
		switch k {
		case "t":
			if haveT {
				return 0, nil, inbox.Errorf(inbox.CauseSignatureMalformed, "the Stripe-Signature header has more than one timestamp")
			}
			n, err := strconv.ParseInt(val, 10, 64)
			if err != nil || n <= 0 {
				return 0, nil, inbox.Errorf(inbox.CauseSignatureMalformed, "the Stripe-Signature timestamp is not a Unix time")
			}
			ts, haveT = n, true
		case "v1":
			sig, err := hex.DecodeString(val)
			if err != nil || len(sig) != sha256.Size {
				// A garbled entry cannot match; skip it like stripe-go does,
				// so one bad entry does not hide a good one beside it.
				continue
			}
			sigs = append(sigs, sig)
		}
	}
	if !haveT {
		return 0, nil, inbox.Errorf(inbox.CauseSignatureMalformed, "the Stripe-Signature header has no timestamp (t=)")
	}
	if len(sigs) == 0 {
		return 0, nil, inbox.Errorf(inbox.CauseSignatureMalformed, "the Stripe-Signature header has no valid v1 signature")
	}
	return ts, sigs, nil
}

// Sign implements Signer with Stripe's Stripe-Signature header.
func (v *stripeVerifier) Sign(body []byte, _, _ string, now time.Time) http.Header {
	ts := strconv.FormatInt(now.Unix(), 10)
	mac := hmac.New(sha256.New, v.secrets[0])
	mac.Write([]byte(ts + "."))
	mac.Write(body)
	h := http.Header{}
	h.Set("Stripe-Signature", fmt.Sprintf("t=%s,v1=%s", ts, hex.EncodeToString(mac.Sum(nil))))
	return h
}

// tolerance implements tolerant.
func (v *stripeVerifier) tolerance() time.Duration { return v.tol }

// makeSample implements sampleMaker with a failed invoice payment, shaped like
// Stripe's event object: the id and type are in the body.
func (v *stripeVerifier) makeSample(now time.Time) (Sample, error) {
	suffix, _ := randomIDs()
	id, typ := "evt_dev_"+suffix, "invoice.payment_failed"
	body := fmt.Sprintf(`{"id":%q,"object":"event","type":%q,"created":%d,"livemode":false,`+
		`"data":{"object":{"id":"in_dev_%s","object":"invoice","customer":"cus_dev","amount_due":2000,"currency":"usd","attempt_count":1}}}`,
		id, typ, now.Unix(), suffix)
	return Sample{EventID: id, EventType: typ, Body: []byte(body), Header: http.Header{}}, nil
}
