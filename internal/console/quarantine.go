package console

import (
	"html/template"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"time"
	"unicode/utf8"

	"github.com/webhook-inbox/webhook-inbox/shared/inbox"
	"github.com/webhook-inbox/webhook-inbox/shared/operations"
	"github.com/webhook-inbox/webhook-inbox/shared/operatorapi"
)

// The quarantine (API.Quarantine, API.QuarantinedDelivery), its
// re-ingest (API.Reingest: counted, then confirmed) and its purge
// (API.Purge: counted, then confirmed, bulk.go). Nothing of a
// quarantined delivery is authenticated: its text is shown cleaned.

type quarantineData struct {
	Now        time.Time
	Form       url.Values
	Deliveries []operations.Quarantined
	// Filtered: the list has a filter; Selection is it as the re-ingest
	// form's hidden fields.
	Filtered  bool
	Selection url.Values
	Next      template.URL
	// Reingested is the outcome of the re-ingest just done, if any;
	// Purged how many deliveries the purge just done deleted.
	Reingested string
	Purged     string
	// Purge is the filter as the purge form's hidden fields: nil unless
	// it names a source (a purge takes no wider selection).
	Purge url.Values
	Error string
}

func (d quarantineData) at() time.Time { return d.Now }

// quarantine lists a page of the quarantined deliveries, newest first.
func (s *Server) quarantine(w http.ResponseWriter, r *http.Request) error {
	qs := r.URL.Query()
	d := quarantineData{Form: qs}
	if st, du, rf := qs.Get("stored"), qs.Get("duplicates"), qs.Get("refused"); st != "" {
		if _, err := strconv.Atoi(st + du + rf); err == nil {
			d.Reingested = st + " stored, " + du + " already stored, " + rf + " still refused"
		}
	}
	if n, err := strconv.Atoi(qs.Get("purged")); err == nil && n >= 0 {
		d.Purged = strconv.Itoa(n)
	}
	q, err := operatorapi.ParseQuarantine(qs)
	var p *operations.QuarantinePage
	if err == nil {
		p, err = s.api.Quarantine(r.Context(), q)
	}
	if err != nil {
		if !inPlace(err) {
			return err
		}
		d.Error = messageOf(err)
		return s.render(w, r, err, "quarantine", "Quarantine", d)
	}
	d.Now, d.Deliveries = p.At, p.Deliveries
	sel := operations.QuarantineSelection{Source: q.Source, Window: q.Window}
	d.Filtered = sel != (operations.QuarantineSelection{})
	sel.All = !d.Filtered
	d.Selection = quarantineSelectionValues(sel)
	if sel.Source != "" {
		d.Purge = d.Selection
	}
	if p.NextBefore != nil {
		q.Before = *p.NextBefore
		d.Next = template.URL("/quarantine?" + operatorapi.QuarantineValues(q).Encode())
	}
	return s.render(w, r, nil, "quarantine", "Quarantine", d)
}

type quarantinedData struct {
	Now time.Time
	operations.QuarantinedDetail
	// HeaderNames are the kept headers' names, sorted.
	HeaderNames []string
	// BodyText is the body when it is UTF-8 text.
	BodyText string
	BodyNote string
}

func (d quarantinedData) at() time.Time { return d.Now }

// quarantined shows one quarantined delivery: why, the kept headers and
// its body.
func (s *Server) quarantined(w http.ResponseWriter, r *http.Request) error {
	id, err := strconv.ParseInt(r.PathValue("id"), 10, 64)
	if err != nil || id <= 0 {
		return inbox.Errorf(inbox.CauseInvalidArgument, "not a quarantined delivery's id")
	}
	q, err := s.api.QuarantinedDelivery(r.Context(), id)
	if err != nil {
		return err
	}
	d := quarantinedData{QuarantinedDetail: *q}
	for k := range q.Headers {
		d.HeaderNames = append(d.HeaderNames, k)
	}
	slices.Sort(d.HeaderNames)
	switch {
	case !utf8.Valid(q.Body):
		d.BodyNote = "The body is not UTF-8 text: `webhookctl quarantine show " + strconv.FormatInt(id, 10) + " --body-out FILE` writes it."
	default:
		d.BodyText = string(q.Body)
		if q.BodyTruncated {
			d.BodyNote = "Only the first part is shown: `webhookctl quarantine show --body-out FILE` writes it whole."
		}
	}
	return s.render(w, r, nil, "quarantined", "Quarantined delivery "+strconv.FormatInt(id, 10), d)
}

// quarantineSelectionValues writes a re-ingest's selection as its form's
// fields: the quarantine list's keys, id, and all=1.
func quarantineSelectionValues(sel operations.QuarantineSelection) url.Values {
	v := operatorapi.QuarantineValues(operations.QuarantineQuery{Source: sel.Source, Window: sel.Window})
	if sel.ID != 0 {
		v.Set("id", strconv.FormatInt(sel.ID, 10))
	}
	if sel.All {
		v.Set("all", "1")
	}
	return v
}

// reingestSelection reads a re-ingest's selection from its form.
func reingestSelection(form url.Values) (operations.QuarantineSelection, error) {
	q, err := operatorapi.ParseQuarantine(form)
	if err != nil {
		return operations.QuarantineSelection{}, err
	}
	sel := operations.QuarantineSelection{Source: q.Source, Window: q.Window, All: form.Get("all") == "1"}
	if s := form.Get("id"); s != "" {
		if sel.ID, err = strconv.ParseInt(s, 10, 64); err != nil || sel.ID <= 0 {
			return sel, inbox.Errorf(inbox.CauseInvalidArgument, "not a quarantined delivery's id")
		}
	}
	return sel, nil
}

// reingestData is the re-ingest's confirmation page.
type reingestData struct {
	Now time.Time
	operations.QuarantineSelection
	Fields  url.Values
	Count   int
	Changed bool
}

func (d reingestData) at() time.Time { return d.Now }

// reingest is two POSTs (bulkAction), as a requeue: the first counts what
// the selection takes and asks to confirm; the second, with the count the
// operator saw, re-ingests, unless the count changed in between. One call
// takes what it takes (ReingestPerCall): nothing continues it.
func (s *Server) reingest(w http.ResponseWriter, r *http.Request) error {
	ctx := r.Context()
	form := r.PostForm
	sel, err := reingestSelection(form)
	if err != nil {
		return err
	}
	d := reingestData{QuarantineSelection: sel, Fields: quarantineSelectionValues(sel)}
	var res *operations.ReingestResult
	_, ran, err := bulkAction{
		what: "re-ingest",
		call: func(dry bool, expect *int, _ *operations.ActionCursor) (bulkCall, error) {
			var err error
			if res, err = s.api.Reingest(ctx, operations.ReingestRequest{Select: sel, DryRun: dry, Expect: expect, Reason: s.cfg.Reason}); err != nil {
				return bulkCall{}, err
			}
			return bulkCall{matched: res.Matched}, nil
		},
		ask: func(count int, changed error) error {
			d.Count, d.Changed = count, changed != nil
			return s.render(w, r, changed, "reingest", "Re-ingest quarantined deliveries", d)
		},
	}.run(form)
	if err != nil || !ran {
		return err
	}
	s.log.Info("console: quarantine re-ingested", "operator", s.who, "stored", res.Stored, "duplicates", res.Duplicates,
		"refused", res.Refused, "quarantined", sel.ID, "source", sel.Source, "all", sel.All)
	v := url.Values{}
	if sel.ID == 0 {
		v = operatorapi.QuarantineValues(operations.QuarantineQuery{Source: sel.Source, Window: sel.Window})
	}
	v.Set("stored", strconv.Itoa(res.Stored))
	v.Set("duplicates", strconv.Itoa(res.Duplicates))
	v.Set("refused", strconv.Itoa(res.Refused))
	return redirect(w, r, "/quarantine", v)
}

// purgeData is the purge's confirmation page.
type purgeData struct {
	Now time.Time
	operations.QuarantineSelection
	Fields url.Values
	// Reason is what the operator typed (else the console's --reason).
	Reason  string
	Count   int
	Changed bool
}

func (d purgeData) at() time.Time { return d.Now }

// purge is two POSTs (bulkAction), as the resolve: the first counts the
// quarantined deliveries the selection deletes and asks to confirm; the
// second, with the count the operator saw, deletes them in one
// transaction with its record. A purge names a delivery or a source
// (operations refuses anything wider), so all=1 is not read.
func (s *Server) purge(w http.ResponseWriter, r *http.Request) error {
	ctx := r.Context()
	form := r.PostForm
	sel, err := reingestSelection(form)
	if err != nil {
		return err
	}
	sel.All = false
	reason := s.reasonOf(form)
	d := purgeData{QuarantineSelection: sel, Fields: quarantineSelectionValues(sel), Reason: reason}
	res, ran, err := bulkAction{
		what: "purge",
		call: func(dry bool, expect *int, _ *operations.ActionCursor) (bulkCall, error) {
			res, err := s.api.Purge(ctx, operations.PurgeRequest{Select: sel, DryRun: dry, Expect: expect, Reason: reason})
			if err != nil {
				return bulkCall{}, err
			}
			// One transaction: nothing continues a purge.
			return bulkCall{matched: res.Deliveries, done: res.Deliveries, actionID: res.ActionID}, nil
		},
		ask: func(count int, changed error) error {
			d.Count, d.Changed = count, changed != nil
			return s.render(w, r, changed, "purge", "Purge quarantined deliveries", d)
		},
	}.run(form)
	if err != nil || !ran {
		return err
	}
	s.log.Info("console: quarantine purged", "operator", s.who, "deliveries", res.done, "action_id", res.actionID,
		"quarantined", sel.ID, "source", sel.Source)
	v := url.Values{}
	if sel.ID == 0 {
		v = operatorapi.QuarantineValues(operations.QuarantineQuery{Source: sel.Source, Window: sel.Window})
	}
	v.Set("purged", strconv.Itoa(res.done))
	return redirect(w, r, "/quarantine", v)
}
