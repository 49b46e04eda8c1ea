package receiver_test

import (
	"bytes"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/webhook-inbox/webhook-inbox/internal/testkit/field"
	"github.com/webhook-inbox/webhook-inbox/shared/inbox"
	"github.com/webhook-inbox/webhook-inbox/shared/receiver"
	"github.com/webhook-inbox/webhook-inbox/shared/storage"
)

// silentDoc is docStart with silent_after on stripe (and more sources).
func silentDoc(stripeAfter, more string) string {
	return fmt.Sprintf(`{"sources":{"stripe":{"kind":"stripe","secrets":[%q],"silent_after":%q}%s}}`, secretOne, stripeAfter, more)
}

func activityOf(t *testing.T, s *storage.Store) map[string]inbox.SourceActivity {
	t.Helper()
	list, err := s.SourceActivityList(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]inbox.SourceActivity{}
	for _, a := range list {
		out[a.Source] = a
	}
	return out
}

// TestReceiverRecordsSourceActivity: the first delivery records every
// configured source with its silent_after; deliveries within the next
// minute wait for the record a minute on (one statement a minute per
// container), which a re-read document's settings reach, and which marks
// a source taken out of the document as no longer configured.
func TestReceiverRecordsSourceActivity(t *testing.T) {
	t.Parallel()
	usDoc := fmt.Sprintf(`,"stripe-us":{"kind":"stripe","secrets":[%q]}`, secretUS)
	euDoc := fmt.Sprintf(`,"stripe-eu":{"kind":"stripe","secrets":[%q],"silent_after":"24h"}`, secretEU)
	first := silentDoc("6h", usDoc)
	r := setupReload(t, time.Minute, first)
	t0 := r.clock.Now()
	if a := r.deliver(t, first, "stripe", "evt_act_1"); a.Status != receiver.StatusAccepted {
		t.Fatalf("first delivery: %+v", a)
	}
	got := activityOf(t, r.store)
	stripe, us := got["stripe"], got["stripe-us"]
	if len(got) != 2 || !field.Check(t, "stripe after its first delivery",
		field.Eq("Configured", stripe.Configured, true),
		field.Eq("SilentAfter", stripe.SilentAfter, 6*time.Hour),
		field.Eq("LastReceivedAt", stripe.LastReceivedAt != nil && stripe.LastReceivedAt.Equal(t0), true),
	) || !field.Check(t, "stripe-us, configured and silent so far",
		field.Eq("Configured", us.Configured, true),
		field.Eq("SilentAfter", us.SilentAfter, time.Duration(0)),
		field.Eq("LastReceivedAt", us.LastReceivedAt == nil, true),
		field.Eq("SeenAt", us.SeenAt.Equal(t0), true),
	) {
		t.Fatalf("activity: %+v", got)
	}

	// Within the minute: served, not recorded.
	r.clock.Advance(30 * time.Second)
	if a := r.deliver(t, first, "stripe", "evt_act_2"); a.Status != receiver.StatusAccepted {
		t.Fatalf("second delivery: %+v", a)
	}
	if s := activityOf(t, r.store)["stripe"]; !s.LastReceivedAt.Equal(t0) {
		t.Fatalf("recorded again within the minute: %+v", s)
	}
	// A duplicate is a delivery too; a minute after the first record, the
	// document read again (stripe's setting changed, stripe-us gone,
	// stripe-eu added) is what is recorded, with stripe's newest delivery.
	next := silentDoc("2h", euDoc)
	r.write(t, next)
	r.clock.Advance(30 * time.Second)
	if a := r.deliver(t, next, "stripe", "evt_act_2"); a.Status != receiver.StatusDuplicate {
		t.Fatalf("duplicate: %+v", a)
	}
	got = activityOf(t, r.store)
	stripe, us, eu := got["stripe"], got["stripe-us"], got["stripe-eu"]
	if len(got) != 3 || !field.Check(t, "stripe",
		field.Eq("SilentAfter", stripe.SilentAfter, 2*time.Hour),
		field.Eq("LastReceivedAt", stripe.LastReceivedAt != nil && stripe.LastReceivedAt.Equal(t0.Add(time.Minute)), true),
	) || !field.Check(t, "stripe-us",
		field.Eq("Configured", us.Configured, false),
		field.Eq("SilentAfter", us.SilentAfter, time.Duration(0)),
	) || !field.Check(t, "stripe-eu",
		field.Eq("Configured", eu.Configured, true),
		field.Eq("SilentAfter", eu.SilentAfter, 24*time.Hour),
		field.Eq("LastReceivedAt", eu.LastReceivedAt == nil, true),
	) {
		t.Fatalf("activity: %+v", got)
	}
}

// TestReloadRefusesABadSilentAfter: a document read again whose
// silent_after does not parse is refused like any invalid document: the
// sources in use stay, and the line that says so names the field, not
// the value or a secret.
func TestReloadRefusesABadSilentAfter(t *testing.T) {
	t.Parallel()
	good := silentDoc("6h", "")
	r := setupReload(t, time.Minute, good)
	r.write(t, strings.Replace(good, `"6h"`, `"`+secretRolled+`"`, 1))
	r.clock.Advance(time.Minute)
	if a := r.deliver(t, good, "stripe", "evt_bad_doc"); a.Code != http.StatusOK || r.reads.Load() != 1 {
		t.Fatalf("after a bad document: %+v, %d reads; want served on the sources in use", a, r.reads.Load())
	}
	refused := r.linesWith(t, inbox.CauseSourcesReloadRefused)
	if len(refused) != 1 || !strings.Contains(fmt.Sprint(refused[0]), `field "silent_after"`) {
		t.Fatalf("refusal lines: %v", refused)
	}
	for _, l := range r.logs.lines() {
		if bytes.Contains(l, []byte("whsec_")) {
			t.Errorf("a log line shows a secret: %s", l)
		}
	}
}
