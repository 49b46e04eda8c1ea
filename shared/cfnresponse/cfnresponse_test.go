package cfnresponse_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/cfn"

	"github.com/webhook-inbox/webhook-inbox/internal/testkit/field"
	"github.com/webhook-inbox/webhook-inbox/shared/cfnresponse"
)

// TestForKeepsThePhysicalID: Create gets the resource's id; any other
// request keeps the one CloudFormation sent (another would make it
// replace the resource), unless it sent none.
func TestForKeepsThePhysicalID(t *testing.T) {
	t.Parallel()
	for typ, want := range map[cfn.RequestType]string{cfn.RequestCreate: "mine", cfn.RequestUpdate: "theirs", cfn.RequestDelete: "theirs"} {
		r := cfnresponse.For(cfn.Event{RequestType: typ, PhysicalResourceID: "theirs", RequestID: "r", StackID: "s", LogicalResourceID: "l"}, "mine")
		field.Check(t, string(typ),
			field.Eq("PhysicalResourceID", r.PhysicalResourceID, want),
			field.Eq("RequestID", r.RequestID, "r"),
			field.Eq("StackID", r.StackID, "s"),
			field.Eq("LogicalResourceID", r.LogicalResourceID, "l"),
		)
	}
	if r := cfnresponse.For(cfn.Event{RequestType: cfn.RequestDelete}, "mine"); r.PhysicalResourceID != "mine" {
		t.Errorf("Delete without an id: %+v", r)
	}
}

// TestWorkContextKeepsTheReserve: the work ends Reserve before the
// deadline, or halfway when less than twice that is left.
func TestWorkContextKeepsTheReserve(t *testing.T) {
	t.Parallel()
	for left, reserve := range map[time.Duration]time.Duration{time.Minute: 10 * time.Second, 4 * time.Second: 2 * time.Second} {
		ctx, cancel := context.WithTimeout(t.Context(), left)
		work, got, cancelWork := cfnresponse.WorkContext(ctx)
		dl, _ := ctx.Deadline()
		wdl, ok := work.Deadline()
		if !ok || got.Round(100*time.Millisecond) != reserve || dl.Sub(wdl).Round(100*time.Millisecond) != reserve {
			t.Errorf("%v left: reserve %v, work ends %v before", left, got, dl.Sub(wdl))
		}
		cancelWork()
		cancel()
	}
	if _, r, cancel := cfnresponse.WorkContext(t.Context()); r != 0 {
		t.Errorf("no deadline: reserve %v", r)
	} else {
		cancel()
	}
}

// TestEncodeCutsTheReason: the document fits CloudFormation's 4096 bytes,
// its reason cut on a character boundary; Redact hides every value.
func TestEncodeCutsTheReason(t *testing.T) {
	t.Parallel()
	body, err := cfnresponse.Encode(cfnresponse.Response{Status: "FAILED", Reason: strings.Repeat("é", 4000)})
	if err != nil || len(body) > cfnresponse.MaxResponseBytes || !strings.Contains(string(body), "é …") {
		t.Fatalf("%d bytes, %v", len(body), err)
	}
	if got := cfnresponse.Redact("pw hunter2 and hunter2", []string{"", "hunter2"}); got != "pw xxxxx and xxxxx" {
		t.Fatalf("Redact = %q", got)
	}
}
