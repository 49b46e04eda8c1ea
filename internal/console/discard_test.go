package console_test

import (
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/webhook-inbox/webhook-inbox/internal/console"
	"github.com/webhook-inbox/webhook-inbox/internal/testkit/factory"
	"github.com/webhook-inbox/webhook-inbox/internal/testkit/field"
	"github.com/webhook-inbox/webhook-inbox/shared/inbox"
	"github.com/webhook-inbox/webhook-inbox/shared/operations"
	"github.com/webhook-inbox/webhook-inbox/shared/storage"
)

// discardSetup is a console over b on a database holding two stripe
// events retrying after a declined card, one retrying after a timeout, a
// pending github event and a processed stripe one; it returns the two
// declined ones.
func discardSetup(t *testing.T, b backend, edit func(*console.Config)) (*fixture, []*inbox.Event) {
	t.Helper()
	f := setupWith(t, b, nil, edit)
	declined := factory.Events(f.ctx, t, f.store, 2, &factory.EventOpts{Source: "stripe", Type: "invoice.paid", State: inbox.StateRetrying,
		Cause: inbox.CauseHandlerFailed, LastError: "stripe: card DECLINED"})
	factory.Event(f.ctx, t, f.store, &factory.EventOpts{Source: "stripe", Type: "invoice.paid", State: inbox.StateRetrying,
		Cause: inbox.CauseHandlerTimeout, LastError: "context deadline exceeded"})
	factory.Event(f.ctx, t, f.store, &factory.EventOpts{Source: "github", SourceKind: "github", Type: "push"})
	factory.Event(f.ctx, t, f.store, &factory.EventOpts{Source: "stripe", Type: "invoice.paid", State: inbox.StateProcessed})
	return f, declined
}

// discarded counts the events finished by a discard.
func (f *fixture) discarded() int {
	f.t.Helper()
	var n int
	if err := f.pool.QueryRow(f.ctx, `SELECT count(*) FROM webhook_events WHERE outcome = 'discarded'`).Scan(&n); err != nil {
		f.t.Fatal(err)
	}
	return n
}

// TestDiscardCountsThenConfirms: the events list's filter, narrowed by
// the last error's text, asks to discard: the first POST shows the count
// and changes nothing; a confirmation whose count is stale asks again and
// changes nothing; one without a reason is refused and changes nothing;
// the one with both finishes exactly the selected events, recorded with
// the reason, and the list says so.
func TestDiscardCountsThenConfirms(t *testing.T) {
	t.Parallel()
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) {
			t.Parallel()
			testDiscardCountsThenConfirms(t, b)
		})
	}
}

func testDiscardCountsThenConfirms(t *testing.T, b backend) {
	f, declined := discardSetup(t, b, nil)
	f.login()
	_, page := f.get("/events?source=stripe")
	if !strings.Contains(page, `id="discard-filter"`) || !strings.Contains(page, `<option value="handler_timeout">`) {
		t.Fatalf("the filtered list offers no discard (with the causes suggested):\n%s", page)
	}
	csrf := f.csrf(page)

	ask := url.Values{"csrf": {csrf}, "source": {"stripe"}, "error": {"declined"}}
	code, body := f.post("/events/discard", ask, nil)
	if code != http.StatusOK || !strings.Contains(body, "This discards <strong>2</strong> events") || !strings.Contains(body, `name="reason" required`) {
		t.Fatalf("first POST = %d, want the count and a reason asked\n%s", code, body)
	}
	if n := f.discarded(); n != 0 {
		t.Fatalf("asking to confirm discarded %d events", n)
	}

	// A third declined card since: the count the operator saw is stale.
	third := factory.Event(f.ctx, t, f.store, &factory.EventOpts{Source: "stripe", Type: "invoice.paid", State: inbox.StateRetrying,
		LastError: "card declined again"})
	confirm := url.Values{"csrf": {csrf}, "source": {"stripe"}, "error": {"declined"}, "confirm": {"yes"}, "count": {"2"}, "reason": {"declined cards are final"}}
	if code, body := f.post("/events/discard", confirm, nil); code != http.StatusConflict || !strings.Contains(body, "changed since you looked") ||
		!strings.Contains(body, "<strong>3</strong>") || !strings.Contains(body, "declined cards are final") {
		t.Fatalf("stale confirmation = %d, want 409 asking again with the reason kept\n%s", code, body)
	}
	// A confirmation that carries no count confirmed nothing: asked again.
	noCount := url.Values{"csrf": {csrf}, "source": {"stripe"}, "error": {"declined"}, "confirm": {"yes"}, "reason": {"x"}}
	if code, body := f.post("/events/discard", noCount, nil); code != http.StatusConflict || !strings.Contains(body, "<strong>3</strong>") {
		t.Fatalf("confirmation without a count = %d, want 409 asking again\n%s", code, body)
	}
	confirm.Set("count", "3")
	confirm.Del("reason")
	if code, body := f.post("/events/discard", confirm, nil); code != http.StatusBadRequest || !strings.Contains(body, "needs a reason") {
		t.Fatalf("confirmation without a reason = %d, want 400 asking for one\n%s", code, body)
	}
	if n := f.discarded(); n != 0 {
		t.Fatalf("the refused confirmations discarded %d events", n)
	}

	confirm.Set("reason", "declined cards are final")
	code, body = f.post("/events/discard", confirm, nil)
	if code != http.StatusOK || !strings.Contains(body, "Discarded 3 events: they will never run.") {
		t.Fatalf("confirmed discard = %d\n%s", code, body)
	}
	if n := f.discarded(); n != 3 {
		t.Errorf("%d events discarded, want the 3 declined ones", n)
	}
	for _, e := range append(declined, third) {
		got, err := f.store.EventGetByID(f.ctx, e.ID)
		if err != nil || got.Outcome != inbox.OutcomeDiscarded || got.Attempts != e.Attempts {
			t.Errorf("event %d after the discard: outcome %q, %d attempts (had %d), %v", e.ID, got.Outcome, got.Attempts, e.Attempts, err)
		}
	}
	acts, err := f.store.OperatorActionList(f.ctx, time.Time{}, 10)
	if err != nil || len(acts) != 1 {
		t.Fatalf("operator actions = %+v, %v; want one", acts, err)
	}
	filter := strings.ReplaceAll(string(acts[0].Filter), " ", "")
	field.Check(t, "operator action",
		field.Eq("Action", acts[0].Action, inbox.ActionDiscard),
		field.Eq("Actor", acts[0].Actor, f.who),
		field.Eq("Reason", acts[0].Reason, "declined cards are final"),
		field.Eq("Events", acts[0].Events, 3),
		field.Is("Filter", filter, strings.Contains(filter, `"source":"stripe"`) && strings.Contains(filter, `"error_text":"declined"`), "source stripe, error text declined"),
	)
}

// TestDiscardByCauseAndAll: a cause typed on the unfiltered list narrows
// the discard rather than riding along with "every unprocessed event";
// the unfiltered list's discard takes every unprocessed event (never a
// processed one); the console's --reason stands in for a reason not
// typed.
func TestDiscardByCauseAndAll(t *testing.T) {
	t.Parallel()
	f, _ := discardSetup(t, backends[0], func(c *console.Config) { c.Reason = "INC-9" })
	f.login()
	_, page := f.get("/events")
	if !strings.Contains(page, `name="all" value="1"`) {
		t.Fatalf("the unfiltered list's discard is not of every event:\n%s", page)
	}
	csrf := f.csrf(page)
	// The list's window is the time received: the discard's received_*.
	if _, page := f.get("/events?type=invoice.paid&since=1h"); !strings.Contains(page, `name="received_since" value="1h"`) ||
		!strings.Contains(page, `name="type" value="invoice.paid"`) || strings.Contains(page, `name="all"`) {
		t.Errorf("the discard of a windowed list does not carry its window:\n%s", page)
	}
	windowed := url.Values{"csrf": {csrf}, "type": {"invoice.paid"}, "received_since": {"1h"}}
	if code, body := f.post("/events/discard", windowed, nil); code != http.StatusOK || !strings.Contains(body, "This discards <strong>3</strong> events") ||
		!strings.Contains(body, "received in the last 1h") || !strings.Contains(body, `href="/events?since=1h&amp;type=invoice.paid"`) {
		t.Errorf("a windowed discard = %d\n%s", code, body)
	}
	byCause := url.Values{"csrf": {csrf}, "all": {"1"}, "cause": {"handler_timeout"}}
	if code, body := f.post("/events/discard", byCause, nil); code != http.StatusOK || !strings.Contains(body, "This discards <strong>1</strong> event:") ||
		strings.Contains(body, "every unprocessed event") || !strings.Contains(body, "INC-9") {
		t.Fatalf("a discard by cause = %d\n%s", code, body)
	}
	all := url.Values{"csrf": {csrf}, "all": {"1"}}
	code, body := f.post("/events/discard", all, nil)
	if code != http.StatusOK || !strings.Contains(body, "This discards <strong>4</strong> events") || !strings.Contains(body, "every unprocessed event") {
		t.Fatalf("a discard of all = %d\n%s", code, body)
	}
	all.Set("confirm", "yes")
	all.Set("count", "4")
	if code, body := f.post("/events/discard", all, nil); code != http.StatusOK || !strings.Contains(body, "Discarded 4 events") {
		t.Fatalf("confirmed = %d\n%s", code, body)
	}
	acts, err := f.store.OperatorActionList(f.ctx, time.Time{}, 1)
	if err != nil || len(acts) != 1 || acts[0].Reason != "INC-9" || acts[0].Events != 4 {
		t.Fatalf("the discard's record = %+v, %v", acts, err)
	}
	var handled int
	if err := f.pool.QueryRow(f.ctx, `SELECT count(*) FROM webhook_events WHERE outcome = 'handled'`).Scan(&handled); err != nil || handled != 1 {
		t.Errorf("handled events after the discard = %d, %v; want the processed one untouched", handled, err)
	}
}

// TestDiscardRefusals: a state filter or a search hides the discard (a
// discard cannot take either); a window of death is refused; a discard
// from another origin, without the session's CSRF token, or on a
// read-only console is refused; none changes anything.
func TestDiscardRefusals(t *testing.T) {
	t.Parallel()
	f, _ := discardSetup(t, backends[0], nil)
	f.login()
	for _, path := range []string{"/events?state=retrying", `/events?match={"a":1}`} {
		if _, page := f.get(path); strings.Contains(page, `id="discard-filter"`) {
			t.Errorf("%s offers a discard", path)
		}
	}
	_, page := f.get("/events")
	csrf := f.csrf(page)
	confirm := func(csrf string) url.Values {
		return url.Values{"csrf": {csrf}, "all": {"1"}, "confirm": {"yes"}, "count": {"4"}, "reason": {"r"}}
	}
	if code, body := f.post("/events/discard", url.Values{"csrf": {csrf}, "since": {"1h"}}, nil); code != http.StatusBadRequest ||
		!strings.Contains(body, "when the events were received") {
		t.Errorf("a window of death = %d\n%s", code, body)
	}
	for name, c := range map[string]struct {
		form    url.Values
		headers map[string]string
	}{
		"another site's Origin": {confirm(csrf), map[string]string{"Origin": "https://evil.example", "Sec-Fetch-Site": ""}},
		"cross-site fetch":      {confirm(csrf), map[string]string{"Sec-Fetch-Site": "cross-site"}},
		"no CSRF token":         {confirm(""), nil},
		"another session's":     {confirm("bm90LXRoaXMtc2Vzc2lvbg"), nil},
	} {
		if code, body := f.post("/events/discard", c.form, c.headers); code != http.StatusForbidden {
			t.Errorf("%s: %d, want 403\n%s", name, code, body)
		}
	}
	if n := f.discarded(); n != 0 {
		t.Fatalf("the refused discards discarded %d events", n)
	}

	ro, _ := discardSetup(t, backends[0], func(c *console.Config) { c.ReadOnly = true; c.Operator = operations.Operator{} })
	ro.login()
	if _, page := ro.get("/events"); strings.Contains(page, "discard") {
		t.Errorf("a read-only console offers a discard:\n%s", page)
	}
	if code, body := ro.post("/events/discard", url.Values{"all": {"1"}, "confirm": {"yes"}, "count": {"4"}, "reason": {"r"}}, nil); code != http.StatusForbidden ||
		!strings.Contains(body, "read-only") {
		t.Errorf("read-only discard = %d %q, want 403 saying read-only", code, body)
	}
	if n := ro.discarded(); n != 0 {
		t.Fatalf("the read-only console discarded %d events", n)
	}
}

// purgeSetup is a console over b on a database holding two quarantined
// stripe deliveries and one github delivery; it returns the github one.
func purgeSetup(t *testing.T, b backend, edit func(*console.Config)) (*fixture, int64) {
	t.Helper()
	f := setupWith(t, b, nil, edit)
	for range 2 {
		factory.Quarantined(f.ctx, t, f.store, &factory.QuarantinedOpts{Source: "stripe"})
	}
	gh := factory.Quarantined(f.ctx, t, f.store, &factory.QuarantinedOpts{Source: "github", Kind: "github"})
	return f, gh
}

// quarantined counts the quarantined deliveries of source ("" every one).
func (f *fixture) quarantined(source string) int {
	f.t.Helper()
	n, err := f.store.QuarantineCount(f.ctx, storage.QuarantineFilter{Source: source})
	if err != nil {
		f.t.Fatal(err)
	}
	return n
}

// TestPurgeCountsThenConfirms: a source's deliveries are purged after the
// count is shown and confirmed; a stale count asks again and deletes
// nothing; the record keeps the reason; a delivery is purged from its
// page; the unfiltered list offers no purge, and a purge naming nothing
// is refused.
func TestPurgeCountsThenConfirms(t *testing.T) {
	t.Parallel()
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) {
			t.Parallel()
			testPurgeCountsThenConfirms(t, b)
		})
	}
}

func testPurgeCountsThenConfirms(t *testing.T, b backend) {
	f, gh := purgeSetup(t, b, nil)
	f.login()
	_, page := f.get("/quarantine")
	if strings.Contains(page, `id="purge-filter"`) || !strings.Contains(page, `id="purge-note"`) {
		t.Errorf("the unfiltered quarantine offers a purge:\n%s", page)
	}
	csrf := f.csrf(page)
	if code, body := f.post("/quarantine/purge", url.Values{"csrf": {csrf}, "all": {"1"}}, nil); code != http.StatusBadRequest ||
		!strings.Contains(body, "names a quarantined delivery or a source") {
		t.Errorf("a purge of all = %d\n%s", code, body)
	}
	if _, page = f.get("/quarantine?source=stripe"); !strings.Contains(page, `id="purge-filter"`) {
		t.Fatalf("the filtered quarantine offers no purge:\n%s", page)
	}
	code, body := f.post("/quarantine/purge", url.Values{"csrf": {csrf}, "source": {"stripe"}, "reason": {"test deliveries"}}, nil)
	if code != http.StatusOK || !strings.Contains(body, "This purges (deletes) <strong>2</strong> quarantined deliveries") {
		t.Fatalf("first POST = %d\n%s", code, body)
	}
	if n := f.quarantined(""); n != 3 {
		t.Fatalf("asking to confirm deleted something: %d left", n)
	}
	factory.Quarantined(f.ctx, t, f.store, &factory.QuarantinedOpts{Source: "stripe"})
	confirm := url.Values{"csrf": {csrf}, "source": {"stripe"}, "reason": {"test deliveries"}, "confirm": {"yes"}, "count": {"2"}}
	if code, body := f.post("/quarantine/purge", confirm, nil); code != http.StatusConflict || !strings.Contains(body, "changed since you looked") ||
		!strings.Contains(body, "<strong>3</strong>") {
		t.Fatalf("stale confirmation = %d, want 409 asking again\n%s", code, body)
	}
	if n := f.quarantined(""); n != 4 {
		t.Fatalf("the stale confirmation deleted something: %d left", n)
	}
	confirm.Set("count", "3")
	if code, body := f.post("/quarantine/purge", confirm, nil); code != http.StatusOK || !strings.Contains(body, "Purged 3 quarantined deliveries") {
		t.Fatalf("confirmed purge = %d\n%s", code, body)
	}
	if s, g := f.quarantined("stripe"), f.quarantined("github"); s != 0 || g != 1 {
		t.Fatalf("after the purge: %d stripe, %d github; want 0 and 1", s, g)
	}
	acts, err := f.store.OperatorActionList(f.ctx, time.Time{}, 1)
	if err != nil || len(acts) != 1 || acts[0].Action != inbox.ActionPurge || acts[0].Reason != "test deliveries" || acts[0].Actor != f.who {
		t.Fatalf("the purge's record = %+v, %v", acts, err)
	}

	// One delivery, from its page.
	_, page = f.get("/quarantine/" + itoa(gh))
	if !strings.Contains(page, `id="purge"`) {
		t.Fatalf("a delivery's page offers no purge:\n%s", page)
	}
	one := url.Values{"csrf": {csrf}, "id": {itoa(gh)}}
	if code, body := f.post("/quarantine/purge", one, nil); code != http.StatusOK || !strings.Contains(body, "<strong>1</strong> quarantined delivery") {
		t.Fatalf("a delivery's purge = %d\n%s", code, body)
	}
	one.Set("confirm", "yes")
	one.Set("count", "1")
	if code, body := f.post("/quarantine/purge", one, nil); code != http.StatusOK || !strings.Contains(body, "Purged 1 quarantined delivery") {
		t.Fatalf("a delivery's confirmed purge = %d\n%s", code, body)
	}
	if n := f.quarantined(""); n != 0 {
		t.Errorf("%d deliveries left, want none", n)
	}
}

// TestPurgeRefusals: a purge from another origin, without the session's
// CSRF token, or on a read-only console is refused and deletes nothing.
func TestPurgeRefusals(t *testing.T) {
	t.Parallel()
	f, _ := purgeSetup(t, backends[0], nil)
	f.login()
	_, page := f.get("/quarantine?source=stripe")
	csrf := f.csrf(page)
	confirm := func(csrf string) url.Values {
		return url.Values{"csrf": {csrf}, "source": {"stripe"}, "confirm": {"yes"}, "count": {"2"}}
	}
	for name, c := range map[string]struct {
		form    url.Values
		headers map[string]string
	}{
		"another site's Origin": {confirm(csrf), map[string]string{"Origin": "https://evil.example", "Sec-Fetch-Site": ""}},
		"cross-site fetch":      {confirm(csrf), map[string]string{"Sec-Fetch-Site": "cross-site"}},
		"no CSRF token":         {confirm(""), nil},
	} {
		if code, body := f.post("/quarantine/purge", c.form, c.headers); code != http.StatusForbidden {
			t.Errorf("%s: %d, want 403\n%s", name, code, body)
		}
	}
	if n := f.quarantined(""); n != 3 {
		t.Fatalf("the refused purges deleted something: %d left", n)
	}
	ro, _ := purgeSetup(t, backends[0], func(c *console.Config) { c.ReadOnly = true; c.Operator = operations.Operator{} })
	ro.login()
	if _, page := ro.get("/quarantine?source=stripe"); strings.Contains(page, "purge-filter") {
		t.Errorf("a read-only console offers a purge:\n%s", page)
	}
	if code, body := ro.post("/quarantine/purge", url.Values{"source": {"stripe"}, "confirm": {"yes"}, "count": {"2"}}, nil); code != http.StatusForbidden ||
		!strings.Contains(body, "read-only") {
		t.Errorf("read-only purge = %d %q, want 403 saying read-only", code, body)
	}
	if n := ro.quarantined(""); n != 3 {
		t.Fatalf("the read-only console deleted something: %d left", n)
	}
}
