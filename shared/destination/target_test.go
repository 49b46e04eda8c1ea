package destination

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/netip"
	"strings"
	"testing"
)

func TestAllowPrivateReachesALocalConsumerByNameAndOverHTTP(t *testing.T) {
	t.Parallel()
	f := setup(t, Config{AllowPrivate: true})
	f.hosts["consumer.example.com"] = []netip.Addr{netip.MustParseAddr("127.0.0.1")}
	c := newConsumer(t, nil)
	r := f.sender.Deliver(t.Context(), forwardTo("https://consumer.example.com:"+c.port()+"/in", secretNew), delivery(`{}`))
	if r.Outcome != Delivered || len(c.requests()) != 1 {
		t.Fatalf("result %+v, want delivered to the local consumer", r)
	}

	// The same consumer refused without AllowPrivate.
	g := setup(t, Config{})
	r = g.sender.Deliver(t.Context(), forwardTo(c.srv.URL, secretNew), delivery(`{}`))
	if r.Outcome != Permanent || !strings.Contains(r.Message, "refused to connect to 127.0.0.1") || len(c.requests()) != 1 {
		t.Fatalf("result %+v, want permanent and nothing more delivered", r)
	}
}

// A consumer that echoes everything it was sent (as debugging endpoints
// do) gets none of the route's secrets into the Result, nor the URL's path
// and query, where webhook URLs carry tokens.
func TestResultHoldsNoSecret(t *testing.T) {
	t.Parallel()
	f := setup(t, Config{AllowPrivate: true})
	echo := func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(400)
		_ = r.Header.Write(w)
		fmt.Fprint(w, r.URL.String())
	}
	c := newConsumer(t, echo)
	target := forwardTo(c.srv.URL+"/services/T0KENPATH?token=Q-T0KEN", secretNew, secretOld)
	target.Forward.Headers = map[string]string{"Authorization": "Bearer very-secret-bearer"}
	r := f.sender.Deliver(t.Context(), target, delivery(`{"card":"4242"}`))
	if r.Outcome != Permanent || !strings.Contains(r.Message, "[redacted]") {
		t.Fatalf("result %+v, want permanent with the echoed values hidden", r)
	}
	for _, secret := range []string{secretNew, secretOld, strings.TrimPrefix(secretNew, "whsec_"), "very-secret-bearer"} {
		if strings.Contains(r.Message, secret) {
			t.Errorf("the message holds %q: %s", secret, r.Message)
		}
	}
	// The path and query are the consumer's echo, not the message's own
	// URL: the message names the host only.
	if !strings.HasPrefix(r.Message, "forward to "+c.srv.URL+": answered 400") {
		t.Errorf("message %q does not start with the host and status", r.Message)
	}

	// Without an answer to echo, the message comes from the transport,
	// whose errors repeat the full URL.
	g := setup(t, Config{})
	r = g.sender.Deliver(t.Context(), forwardTo("https://127.0.0.1:9/services/T0KENPATH?token=Q-T0KEN", secretNew), delivery(`{}`))
	if strings.Contains(r.Message, "T0KEN") || strings.Contains(r.Message, secretNew) {
		t.Fatalf("message %q holds the URL's path or query", r.Message)
	}
}

func TestValidateNamesTheField(t *testing.T) {
	t.Parallel()
	cases := []struct {
		json string
		want string // "" for valid
	}{
		{`{"forward":{"url":"https://hooks.example.com/in","secret":"` + secretNew + `"}}`, ""},
		{`{"forward":{"url":"https://hooks.example.com:8443/in?x=1","secrets":["` + secretNew + `","` + secretOld + `"],"timeout":"30s","headers":{"X-Api-Key":"k"}}}`, ""},
		{`{"forward":{"url":"http://localhost:8080/in","secret":"` + secretNew + `"}}`, ""},
		{`{"forward":{"url":"http://10.0.0.5/in","secret":"` + secretNew + `"}}`, ""},
		{`{"sqs":{"queue_url":"https://sqs.eu-west-1.amazonaws.com/123456789012/orders"}}`, ""},
		{`{"sqs":{"queue_url":"https://sqs.eu-west-1.amazonaws.com/123456789012/orders.fifo"}}`, ""},
		{`{"sqs":{"queue_url":"https://eu-west-1.queue.amazonaws.com/123456789012/orders"}}`, ""},
		{`{"eventbridge":{"bus":"default"}}`, ""},
		{`{"eventbridge":{"bus":"arn:aws:events:eu-west-1:123456789012:event-bus/orders","source":"acme.billing"}}`, ""},

		{`{}`, "one of forward, sqs or eventbridge"},
		{`{"forward":{"url":"https://a.example.com","secret":"` + secretNew + `"},"sqs":{"queue_url":"x"}}`, "not forward and sqs"},
		{`{"forward":{"secret":"` + secretNew + `"}}`, "forward.url: required"},
		{`{"forward":{"url":"http://hooks.example.com/in","secret":"` + secretNew + `"}}`, "forward.url: must be https"},
		{`{"forward":{"url":"http://8.8.8.8/in","secret":"` + secretNew + `"}}`, "forward.url: must be https"},
		{`{"forward":{"url":"ftp://hooks.example.com/in","secret":"` + secretNew + `"}}`, "forward.url: must be https"},
		{`{"forward":{"url":"https://user:pw@hooks.example.com/in","secret":"` + secretNew + `"}}`, "forward.url: has userinfo"},
		{`{"forward":{"url":"https:///in","secret":"` + secretNew + `"}}`, "forward.url: has no host"},
		{`{"forward":{"url":"https://a.example.com:99999/","secret":"` + secretNew + `"}}`, "forward.url: port"},
		{`{"forward":{"url":"https://a.example.com"}}`, "forward.secret: required"},
		{`{"forward":{"url":"https://a.example.com","secret":"c2VjcmV0"}}`, "forward.secret: not a Standard Webhooks secret"},
		{`{"forward":{"url":"https://a.example.com","secret":"whsec_!!"}}`, "forward.secret: the part after whsec_ is not base64"},
		{`{"forward":{"url":"https://a.example.com","secret":"whsec_c2hvcnQ="}}`, "forward.secret: the key is 5 bytes"},
		{`{"forward":{"url":"https://a.example.com","secrets":["` + secretNew + `","whsec_x"]}}`, "forward.secrets[1]:"},
		{`{"forward":{"url":"https://a.example.com","secret":"` + secretNew + `","secrets":["` + secretOld + `"]}}`, "give one, not both"},
		{`{"forward":{"url":"https://a.example.com","secret":"` + secretNew + `","timeout":"10"}}`, "forward.timeout: \"10\" is not a duration"},
		{`{"forward":{"url":"https://a.example.com","secret":"` + secretNew + `","timeout":"31s"}}`, "forward.timeout: 31s is outside"},
		{`{"forward":{"url":"https://a.example.com","secret":"` + secretNew + `","timeout":"-1s"}}`, "forward.timeout: -1s is outside"},
		{`{"forward":{"url":"https://a.example.com","secret":"` + secretNew + `","headers":{"Bad Name":"x"}}}`, `forward.headers["Bad Name"]: not a header name`},
		{`{"forward":{"url":"https://a.example.com","secret":"` + secretNew + `","headers":{"connection":"close"}}}`, `forward.headers["connection"]: set by the delivery`},
		{`{"forward":{"url":"https://a.example.com","secret":"` + secretNew + `","headers":{"Webhook-Signature":"v1,x"}}}`, `forward.headers["Webhook-Signature"]: set by the delivery`},
		{`{"forward":{"url":"https://a.example.com","secret":"` + secretNew + `","headers":{"Webhook-Inbox-Source":"x"}}}`, `forward.headers["Webhook-Inbox-Source"]: set by the delivery`},
		{`{"forward":{"url":"https://a.example.com","secret":"` + secretNew + `","headers":{"Transfer-Encoding":"chunked"}}}`, `set by the delivery itself, or hop-by-hop`},
		{`{"forward":{"url":"https://a.example.com","secret":"` + secretNew + `","headers":{"X-A":"a\r\nX-B: b"}}}`, `forward.headers["X-A"]: the value holds control characters`},
		{`{"sqs":{}}`, "sqs.queue_url: required"},
		{`{"sqs":{"queue_url":"https://example.com/123456789012/orders"}}`, "sqs.queue_url: \"https://example.com/123456789012/orders\" is not an SQS queue URL"},
		{`{"sqs":{"queue_url":"http://sqs.eu-west-1.amazonaws.com/123456789012/orders"}}`, "sqs.queue_url:"},
		{`{"sqs":{"queue_url":"https://sqs.eu-west-1.amazonaws.com/1234/orders"}}`, "sqs.queue_url:"},
		{`{"sqs":{"queue_url":"https://sqs.eu-west-1.amazonaws.com/123456789012/ord ers"}}`, "sqs.queue_url:"},
		{`{"sqs":{"queue_url":"https://sqs.eu-west-1.amazonaws.com/123456789012/` + strings.Repeat("q", 81) + `"}}`, "sqs.queue_url:"},
		{`{"eventbridge":{}}`, "eventbridge.bus: required"},
		{`{"eventbridge":{"bus":"my bus"}}`, "eventbridge.bus: \"my bus\" is not an event bus name"},
		{`{"eventbridge":{"bus":"arn:aws:sqs:eu-west-1:123456789012:orders"}}`, "eventbridge.bus: \"arn:aws:sqs:eu-west-1:123456789012:orders\" is not an event bus ARN"},
		{`{"eventbridge":{"bus":"default","source":"aws.billing"}}`, "eventbridge.source: \"aws.billing\" is not an event source"},
		{`{"eventbridge":{"bus":"default","source":"a b"}}`, "eventbridge.source:"},
	}
	for _, tc := range cases {
		var target Target
		dec := json.NewDecoder(strings.NewReader(tc.json))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&target); err != nil {
			t.Fatalf("%s: %v", tc.json, err)
		}
		err := target.Validate()
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%s: %v, want valid", tc.json, err)
		case tc.want != "" && err == nil:
			t.Errorf("%s: valid, want %q", tc.json, tc.want)
		case tc.want != "" && !strings.Contains(err.Error(), tc.want):
			t.Errorf("%s: %q, want it to say %q", tc.json, err, tc.want)
		}
	}
}

// A route embeds Target, so its target fields sit beside the route's own,
// as a routes entry is written.
func TestTargetEmbedsInARoute(t *testing.T) {
	t.Parallel()
	var route struct {
		Name   string   `json:"name"`
		Source string   `json:"source"`
		Types  []string `json:"types"`
		Target
	}
	doc := `{"name":"billing-forward","source":"billing","types":["invoice.*"],"forward":{"url":"https://hooks.example.com/in","secret":"` + secretNew + `"}}`
	dec := json.NewDecoder(strings.NewReader(doc))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&route); err != nil {
		t.Fatal(err)
	}
	if route.Forward == nil || route.Forward.URL != "https://hooks.example.com/in" || route.Target.Validate() != nil {
		t.Fatalf("route %+v did not read its target", route)
	}
}

func TestDeliverRefusesAnInvalidTargetPermanently(t *testing.T) {
	t.Parallel()
	f := setup(t, Config{AllowPrivate: true})
	r := f.sender.Deliver(t.Context(), Target{}, delivery(`{}`))
	if r.Outcome != Permanent || !strings.Contains(r.Message, "invalid target") {
		t.Fatalf("result %+v", r)
	}
}
