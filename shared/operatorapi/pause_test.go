package operatorapi_test

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/webhook-inbox/webhook-inbox/internal/testkit/factory"
	"github.com/webhook-inbox/webhook-inbox/internal/testkit/field"
	"github.com/webhook-inbox/webhook-inbox/shared/inbox"
	"github.com/webhook-inbox/webhook-inbox/shared/operations"
)

// A pause and a resume go through their routes: counted at the read-only
// API, refused there, done at the acting one under the verified
// principal; pausing twice and resuming what is not paused are conflicts
// with their causes, not server errors.
func TestPauseAndResumeRoutes(t *testing.T) {
	t.Parallel()
	f := setup(t)
	factory.Events(t.Context(), t, f.store, 2, &factory.EventOpts{Source: "shop"})
	req := operations.PauseRequest{Scope: inbox.PauseSource, Name: "shop", Reason: "INC-7"}
	status, body := f.post(f.read, "/v1/pause", req)
	refused(t, status, body, http.StatusForbidden, inbox.CauseReadOnly)
	dry := req
	dry.DryRun = true
	if status, body := f.post(f.read, "/v1/pause", dry); status != 200 || !strings.Contains(string(body), `"events":2`) {
		t.Fatalf("dry run on the read-only API = %d %s", status, body)
	}
	status, body = f.post(f.act, "/v1/pause", req)
	var res operations.PauseResult
	if err := json.Unmarshal(body, &res); status != 200 || err != nil {
		t.Fatalf("pause = %d %s", status, body)
	}
	field.Must(t, "pause", field.Printed("Events", res.Events, 2), field.Printed("Paused", res.Paused, true))
	status, body = f.post(f.act, "/v1/pause", req)
	refused(t, status, body, http.StatusConflict, inbox.CauseAlreadyPaused)
	status, body = f.post(f.act, "/v1/resume", req)
	if status != 200 || !strings.Contains(string(body), `"events":2`) {
		t.Fatalf("resume = %d %s", status, body)
	}
	status, body = f.post(f.act, "/v1/resume", req)
	refused(t, status, body, http.StatusConflict, inbox.CauseNotPaused)
	status, body = f.post(f.act, "/v1/pause", operations.PauseRequest{Scope: inbox.PauseHandler, Name: "shop"})
	refused(t, status, body, http.StatusBadRequest, inbox.CauseInvalidArgument)

	_, acts := f.get(f.read, "/v1/actions")
	var page operations.ActionPage
	if err := json.Unmarshal(acts, &page); err != nil {
		t.Fatalf("actions: %v: %s", err, acts)
	}
	field.Must(t, "actions", field.Printed("len(Actions)", len(page.Actions), 2))
	field.Must(t, "pause's record", field.Printed("Action", page.Actions[1].Action, inbox.ActionPause), field.Printed("Actor", page.Actions[1].Actor, alice))
}
