package localinvoke_test

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/lambda"
	"github.com/aws/aws-sdk-go-v2/service/lambda/types"

	"github.com/webhook-inbox/webhook-inbox/internal/devstack/localinvoke"
	"github.com/webhook-inbox/webhook-inbox/internal/testkit/field"
	"github.com/webhook-inbox/webhook-inbox/internal/testkit/poll"
)

func start(t *testing.T) (*localinvoke.Server, *lambda.Client) {
	t.Helper()
	srv, err := localinvoke.Start(localinvoke.Options{RetryPause: time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = srv.Close() })
	client := lambda.New(lambda.Options{
		Region: "us-east-1", BaseEndpoint: aws.String(srv.Endpoint()),
		Credentials: credentials.NewStaticCredentialsProvider(localinvoke.AccessKeyID, localinvoke.SecretAccessKey, ""),
	})
	return srv, client
}

// TestInvokeThroughTheSDK: the real SDK client's synchronous and
// asynchronous invocations, by name and by a qualified ARN, a function
// error, and a function that does not exist, each answered as Lambda
// answers it and recorded as made through the Invoke API.
func TestInvokeThroughTheSDK(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	srv, client := start(t)
	var asyncRuns atomic.Int32
	srv.Register("echo", func(_ context.Context, p []byte) ([]byte, error) { return append([]byte("echo "), p...), nil })
	srv.Register("broken", func(context.Context, []byte) ([]byte, error) { return nil, errors.New("it broke") })
	srv.Register("queued", func(context.Context, []byte) ([]byte, error) {
		asyncRuns.Add(1)
		return nil, errors.New("failing each try")
	})

	out, err := client.Invoke(ctx, &lambda.InvokeInput{FunctionName: aws.String("arn:aws:lambda:us-east-1:123456789012:function:echo:7"), Payload: []byte(`"hi"`)})
	if err != nil || string(out.Payload) != `echo "hi"` || out.FunctionError != nil {
		t.Fatalf("a synchronous invocation: %+v, %v", out, err)
	}
	out, err = client.Invoke(ctx, &lambda.InvokeInput{FunctionName: aws.String("broken")})
	if err != nil || aws.ToString(out.FunctionError) != "Unhandled" {
		t.Fatalf("a function error: %+v, %v", out, err)
	}
	var missing *types.ResourceNotFoundException
	if _, err := client.Invoke(ctx, &lambda.InvokeInput{FunctionName: aws.String("nobody")}); !errors.As(err, &missing) {
		t.Fatalf("an unknown function: %v", err)
	}

	// Event: 202 at once; the function runs later, and a failure is
	// tried twice more, as Lambda's asynchronous invocation does.
	out, err = client.Invoke(ctx, &lambda.InvokeInput{FunctionName: aws.String("queued"), InvocationType: types.InvocationTypeEvent, Payload: []byte(`{}`)})
	if err != nil || out.StatusCode != 202 {
		t.Fatalf("an Event invocation: %+v, %v", out, err)
	}
	poll.Until(t, 5*time.Second, func() (bool, string) {
		invs := srv.Invocations()
		return asyncRuns.Load() == 3 && !invs[len(invs)-1].Finished.IsZero(), fmt.Sprintf("%d tries", asyncRuns.Load())
	})
	invs := srv.Invocations()
	// The unknown function's request is refused, not recorded.
	if len(invs) != 3 {
		t.Fatalf("records: %+v", invs)
	}
	for _, inv := range invs {
		if inv.Via != localinvoke.ViaAPI {
			t.Errorf("%s made via %q, want %q", inv.Function, inv.Via, localinvoke.ViaAPI)
		}
	}
	last := invs[2]
	field.Check(t, "the Event invocation's record",
		field.Eq("Async", last.Async, true),
		field.Eq("Tries", last.Tries, 3),
		field.Is("Err", last.Err, last.Err != nil, "the function's error"),
		field.Eq("Function", last.Function, "queued"),
	)
	for _, inv := range invs {
		if inv.Finished.Before(inv.Started) {
			t.Errorf("%s finished at %v, before it started at %v", inv.Function, inv.Finished, inv.Started)
		}
	}
	if first := invs[0]; first.Async || first.Function != "echo" || string(first.Output) != `echo "hi"` {
		t.Errorf("the synchronous invocation's record: %+v", first)
	}
}

// TestInvokeEvent: a service's event (EventBridge's, the Scheduler's) is
// queued and run as an Event invocation, recorded with who sent it; a
// function that does not exist, or no longer does, is an error.
func TestInvokeEvent(t *testing.T) {
	t.Parallel()
	srv, client := start(t)
	got := make(chan string, 1)
	srv.Register("processor", func(_ context.Context, p []byte) ([]byte, error) {
		got <- string(p)
		return []byte(`{"handled":0}`), nil
	})
	if err := srv.InvokeEvent("arn:aws:lambda:us-east-1:123456789012:function:processor", []byte(`{"wake":"schedule"}`), "scheduler"); err != nil {
		t.Fatal(err)
	}
	select {
	case p := <-got:
		if p != `{"wake":"schedule"}` {
			t.Fatalf("payload %s", p)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the event was not run")
	}
	poll.Until(t, 5*time.Second, func() (bool, string) {
		invs := srv.Invocations()
		return len(invs) == 1 && invs[0].Tries == 1 && string(invs[0].Output) == `{"handled":0}` && !invs[0].Finished.IsZero(), fmt.Sprintf("%+v", invs)
	})
	if inv := srv.Invocations()[0]; !inv.Async || inv.Via != "scheduler" || inv.Function != "processor" {
		t.Fatalf("record %+v", inv)
	}
	if err := srv.InvokeEvent("archiver", nil, "scheduler"); err == nil {
		t.Fatal("an event for a function that does not exist was accepted")
	}
	srv.Unregister("processor")
	if err := srv.InvokeEvent("processor", nil, "scheduler"); err == nil {
		t.Fatal("an event for a deleted function was accepted")
	}
	var missing *types.ResourceNotFoundException
	if _, err := client.Invoke(context.Background(), &lambda.InvokeInput{FunctionName: aws.String("processor")}); !errors.As(err, &missing) {
		t.Fatalf("a deleted function through the SDK: %v", err)
	}
}
