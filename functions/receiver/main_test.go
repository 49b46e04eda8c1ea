package main

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/jackc/pgx/v5"

	"github.com/webhook-inbox/webhook-inbox/internal/sender"
	"github.com/webhook-inbox/webhook-inbox/internal/testkit/field"
	"github.com/webhook-inbox/webhook-inbox/internal/testkit/pgtest"
	"github.com/webhook-inbox/webhook-inbox/internal/testkit/secretstest"
	"github.com/webhook-inbox/webhook-inbox/shared/source"
)

// The database secrets are read through the real SDK from the Secrets
// Manager stand-in (credentials_test.go).
func TestMain(m *testing.M) {
	secretstest.Use()
	pgtest.Main(m)
}

const sources = `{"sources":{"stripe":{"kind":"stripe","secrets":["whsec_lambda_test_0123456789ab"]}}}`

// event loads the recorded API Gateway v2 event and puts a freshly signed
// Stripe body in it, plain or base64-encoded as API Gateway sends binary.
func event(t *testing.T, eventID string, b64 bool) (events.APIGatewayV2HTTPRequest, []byte) {
	t.Helper()
	raw, err := os.ReadFile("testdata/apigw_v2_stripe.json")
	if err != nil {
		t.Fatal(err)
	}
	var ev events.APIGatewayV2HTTPRequest
	if err := json.Unmarshal(raw, &ev); err != nil {
		t.Fatal(err)
	}
	set, err := source.Parse([]byte(sources))
	if err != nil {
		t.Fatal(err)
	}
	src, _ := set.Lookup("stripe")
	// A NUL escape and non-ASCII text: the bytes must arrive unchanged.
	body := fmt.Appendf(nil, `{"id":%q,"object":"event","type":"invoice.paid","data":{"note":"caf\u00e9 \u0000 ☕"}}`, eventID)
	req, err := sender.Sign(src, body, "", time.Now())
	if err != nil {
		t.Fatal(err)
	}
	ev.Headers["stripe-signature"] = req.Header.Get("Stripe-Signature")
	ev.Headers["content-length"] = fmt.Sprint(len(body))
	ev.Body, ev.IsBase64Encoded = string(body), false
	if b64 {
		ev.Body, ev.IsBase64Encoded = base64.StdEncoding.EncodeToString(body), true
	}
	return ev, body
}

func TestLambdaEntry(t *testing.T) {
	t.Parallel()
	url := pgtest.URL(t)
	env := map[string]string{"DATABASE_URL": url, "WEBHOOK_SOURCES": sources, "LOG_LEVEL": "error"}
	h, closePool, err := setup(context.Background(), func(k string) string { return env[k] })
	if err != nil {
		t.Fatal(err)
	}
	defer closePool()

	for _, tc := range []struct {
		name string
		b64  bool
	}{{"plain body", false}, {"base64 body", true}} {
		t.Run(tc.name, func(t *testing.T) {
			id := "evt_lambda_" + map[bool]string{false: "plain", true: "b64"}[tc.b64]
			ev, body := event(t, id, tc.b64)
			resp, err := h(context.Background(), ev)
			if err != nil {
				t.Fatal(err)
			}
			var out struct {
				Status string `json:"status"`
				ID     int64  `json:"id"`
			}
			if err := json.Unmarshal([]byte(resp.Body), &out); err != nil {
				t.Fatalf("response = %d %s: %v", resp.StatusCode, resp.Body, err)
			}
			if !field.Check(t, "response",
				field.Eq("StatusCode", resp.StatusCode, 200),
				field.Eq("status", out.Status, "accepted"),
				field.Is("id", out.ID, out.ID != 0, "set"),
			) {
				t.FailNow()
			}
			if resp.Headers["Content-Type"] != "application/json" {
				t.Fatalf("headers = %v", resp.Headers)
			}
			conn, err := pgx.Connect(context.Background(), url)
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close(context.Background())
			var stored []byte
			if err := conn.QueryRow(context.Background(), `SELECT body FROM webhook_events WHERE provider = 'stripe' AND event_id = $1`, id).Scan(&stored); err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(stored, body) {
				t.Fatalf("stored body %q, sent %q", stored, body)
			}
			// The same event again through Lambda is a duplicate.
			resp, _ = h(context.Background(), ev)
			if resp.StatusCode != 200 || !bytes.Contains([]byte(resp.Body), []byte(`"duplicate"`)) {
				t.Fatalf("redelivery = %d %s", resp.StatusCode, resp.Body)
			}
		})
	}
}

func TestSetupFailsFast(t *testing.T) {
	t.Parallel()
	cases := map[string]map[string]string{
		"no database":    {"WEBHOOK_SOURCES": sources},
		"no sources":     {"DATABASE_URL": "postgres://x@127.0.0.1:1/x"},
		"open door":      {"DATABASE_URL": "postgres://x@127.0.0.1:1/x", "WEBHOOK_SOURCES": `{"sources":{"a":{"kind":"stripe","secrets":[]}}}`},
		"bad body limit": {"DATABASE_URL": "postgres://x@127.0.0.1:1/x", "WEBHOOK_SOURCES": sources, "WEBHOOK_MAX_BODY_BYTES": "lots"},
	}
	for name, env := range cases {
		if _, _, err := setup(context.Background(), func(k string) string { return env[k] }); err == nil {
			t.Errorf("%s: setup succeeded", name)
		}
	}
}

// The checked-in sam local event (events/receiver-github.json, signed with
// the dev GitHub secret, which signs no timestamp so it stays valid) must
// be accepted by the Lambda entry with the dev sources.
func TestSamLocalEventIsAccepted(t *testing.T) {
	t.Parallel()
	env := map[string]string{"DATABASE_URL": pgtest.URL(t), "WEBHOOK_SOURCES_FILE": "../../dev/sources.json", "LOG_LEVEL": "error"}
	h, closePool, err := setup(context.Background(), func(k string) string { return env[k] })
	if err != nil {
		t.Fatal(err)
	}
	defer closePool()
	raw, err := os.ReadFile("../../events/receiver-github.json")
	if err != nil {
		t.Fatal(err)
	}
	var ev events.APIGatewayV2HTTPRequest
	if err := json.Unmarshal(raw, &ev); err != nil {
		t.Fatal(err)
	}
	resp, err := h(context.Background(), ev)
	if err != nil || resp.StatusCode != 200 || !bytes.Contains([]byte(resp.Body), []byte(`"accepted"`)) {
		t.Fatalf("events/receiver-github.json: %d %s %v", resp.StatusCode, resp.Body, err)
	}
}

// TestSetupReportsEveryProblemAtOnce: the logger's and the receiver's
// settings fail together, each naming its variable.
func TestSetupReportsEveryProblemAtOnce(t *testing.T) {
	t.Parallel()
	env := map[string]string{"LOG_LEVEL": "loud", "WEBHOOK_STORE_TIMEOUT": "soon", "DATABASE_QUERY_MODE": "fast"}
	_, _, err := setup(context.Background(), func(k string) string { return env[k] })
	for _, want := range []string{"DATABASE_URL", "DATABASE_QUERY_MODE", "WEBHOOK_SOURCES", "LOG_LEVEL", "WEBHOOK_STORE_TIMEOUT"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("error does not name %s: %v", want, err)
		}
	}
}

// TestAdapterRefusalIsTheReceivers: an event the adapter cannot turn into
// a request is answered in the receiver's shape, by its table.
func TestAdapterRefusalIsTheReceivers(t *testing.T) {
	t.Parallel()
	env := map[string]string{"DATABASE_URL": pgtest.URL(t), "WEBHOOK_SOURCES": sources, "LOG_LEVEL": "error"}
	h, closePool, err := setup(context.Background(), func(k string) string { return env[k] })
	if err != nil {
		t.Fatal(err)
	}
	defer closePool()
	ev, _ := event(t, "evt_bad_base64", false)
	ev.Body, ev.IsBase64Encoded = "not base64!", true
	resp, err := h(context.Background(), ev)
	if err != nil {
		t.Fatal(err)
	}
	var out struct{ Status, Cause string }
	if err := json.Unmarshal([]byte(resp.Body), &out); err != nil {
		t.Fatalf("response = %d %v %s: %v", resp.StatusCode, resp.Headers, resp.Body, err)
	}
	if !field.Check(t, "response",
		field.Eq("StatusCode", resp.StatusCode, 400),
		field.Eq("status", out.Status, "rejected"),
		field.Eq("cause", out.Cause, "unparsable_body"),
		field.Eq("Cache-Control", resp.Headers["Cache-Control"], "no-store"),
	) {
		t.FailNow()
	}
}
