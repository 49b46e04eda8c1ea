package migrator_test

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/cfn"

	"github.com/webhook-inbox/webhook-inbox/shared/cfnresponse"
	"github.com/webhook-inbox/webhook-inbox/shared/migrator"
)

// The tests below run aws-lambda-go's cfn.LambdaWrap and this package's
// handler against the same response server, one difference each, as the
// package comment lists them. Both answer FAILED for cause: the handler
// through Failing (no database needed), LambdaWrap through a function
// returning cause.

// wrapped is cfn.LambdaWrap over a function that fails with cause.
func wrapped(cause error) cfn.CustomResourceLambdaFunction {
	return cfn.LambdaWrap(func(context.Context, cfn.Event) (string, map[string]any, error) {
		return migrator.PhysicalResourceID, nil, cause
	})
}

// ours is the handler a migration function whose start-up failed runs.
func ours(cause error, loopbackAllowed bool) *migrator.Handler {
	return migrator.Failing(cause, slog.New(slog.DiscardHandler), loopbackAllowed)
}

func wrapRequest(url string) migrator.Request {
	return migrator.Request{
		RequestType: cfn.RequestCreate, RequestID: "req-wrap", ResponseURL: url,
		StackID: "arn:aws:cloudformation:eu-west-1:123456789012:stack/inbox/1", LogicalResourceID: "DatabaseSchema",
		ResourceType: "Custom::DatabaseSchema",
	}
}

// TestLambdaWrapDoesNotRetryTheAnswer: a PUT refused once loses
// LambdaWrap's answer; the handler's is sent again and taken.
func TestLambdaWrapDoesNotRetryTheAnswer(t *testing.T) {
	t.Parallel()
	cause := errors.New("the database is unreachable")

	theirs := newResponder(t, http.StatusServiceUnavailable)
	_, err := wrapped(cause)(t.Context(), wrapRequest(theirs.url()))
	if n := theirs.count(); err == nil || n != 1 {
		t.Fatalf("LambdaWrap: %d PUTs, error %v; want 1 PUT and the refusal (it does not retry)", n, err)
	}

	mine := newResponder(t, http.StatusServiceUnavailable)
	if _, err := ours(cause, true).Handle(t.Context(), wrapRequest(mine.url())); err != nil {
		t.Fatalf("handler: %v; want the answer delivered on a retry", err)
	}
	if n := mine.count(); n != 2 {
		t.Fatalf("handler: %d PUTs; want 2 (one refused, one taken)", n)
	}
}

// TestLambdaWrapAnswersAnyURL: a request naming a URL that is not
// CloudFormation's response bucket (here a plain http server on loopback,
// with loopback not allowed) is answered by LambdaWrap; the handler sends
// nothing.
func TestLambdaWrapAnswersAnyURL(t *testing.T) {
	t.Parallel()
	cause := errors.New("the database is unreachable")

	theirs := newResponder(t)
	if _, err := wrapped(cause)(t.Context(), wrapRequest(theirs.url())); err != nil {
		t.Fatalf("LambdaWrap: %v", err)
	}
	if n := theirs.count(); n != 1 {
		t.Fatalf("LambdaWrap: %d PUTs to a forged ResponseURL; want 1 (it answers any URL)", n)
	}

	mine := newResponder(t)
	if _, err := ours(cause, false).Handle(t.Context(), wrapRequest(mine.url())); err == nil {
		t.Fatal("handler: a forged ResponseURL was not refused")
	}
	if n := mine.count(); n != 0 {
		t.Fatalf("handler: %d PUTs to a forged ResponseURL; want 0", n)
	}
}

// TestLambdaWrapSendsTheWholeReason: a 5,000-byte error makes LambdaWrap's
// document longer than CloudFormation's 4,096 bytes; the handler's is cut
// to fit.
func TestLambdaWrapSendsTheWholeReason(t *testing.T) {
	t.Parallel()
	cause := errors.New(strings.Repeat("x", 5000))

	theirs := newResponder(t)
	if _, err := wrapped(cause)(t.Context(), wrapRequest(theirs.url())); err != nil {
		t.Fatalf("LambdaWrap: %v", err)
	}
	if n := len(theirs.lastBody(t)); n <= cfnresponse.MaxResponseBytes {
		t.Fatalf("LambdaWrap sent %d bytes; want over %d (it sends the reason whole)", n, cfnresponse.MaxResponseBytes)
	}

	mine := newResponder(t)
	if _, err := ours(cause, true).Handle(t.Context(), wrapRequest(mine.url())); err != nil {
		t.Fatalf("handler: %v", err)
	}
	if n := len(mine.last(t)); n > cfnresponse.MaxResponseBytes {
		t.Fatalf("handler sent %d bytes; want at most %d", n, cfnresponse.MaxResponseBytes)
	}
}

// TestLambdaWrapAnswersAfterTheDeadline: work that runs until the
// invocation's deadline gets LambdaWrap's answer sent only after it, when
// Lambda has already ended the invocation. The handler's side, work given
// up a reserve before the deadline and FAILED answered in time, needs a
// database: TestAnswersBeforeTheDeadline.
func TestLambdaWrapAnswersAfterTheDeadline(t *testing.T) {
	t.Parallel()
	theirs := newResponder(t)
	ctx, cancel := context.WithTimeout(t.Context(), 300*time.Millisecond)
	defer cancel()
	deadline, _ := ctx.Deadline()
	fn := cfn.LambdaWrap(func(ctx context.Context, _ cfn.Event) (string, map[string]any, error) {
		<-ctx.Done() // a migration waiting for a lock
		return "", nil, ctx.Err()
	})
	_, _ = fn(ctx, wrapRequest(theirs.url()))
	if n := theirs.count(); n != 1 {
		t.Fatalf("LambdaWrap: %d PUTs, want 1", n)
	}
	theirs.mu.Lock()
	at := theirs.got[0].at
	theirs.mu.Unlock()
	if at.Before(deadline) {
		t.Fatalf("LambdaWrap's PUT arrived %v before the deadline; want it after (the work ran until the deadline)", deadline.Sub(at))
	}
}

// lastBody is the last PUT's body, however it was sent (LambdaWrap sends
// no Content-Type header at all, where last wants it present and empty).
func (r *responder) lastBody(t *testing.T) []byte {
	t.Helper()
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.got) == 0 {
		t.Fatal("no answer was PUT to the ResponseURL")
	}
	return r.got[len(r.got)-1].body
}
