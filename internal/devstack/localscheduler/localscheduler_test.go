package localscheduler_test

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/scheduler"
	"github.com/aws/aws-sdk-go-v2/service/scheduler/types"

	"github.com/webhook-inbox/webhook-inbox/internal/devstack/localscheduler"
	"github.com/webhook-inbox/webhook-inbox/internal/testkit/field"
)

// clock is a settable clock.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) now() time.Time  { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *clock) set(t time.Time) { c.mu.Lock(); defer c.mu.Unlock(); c.t = t }

func client(srv *localscheduler.Server) *scheduler.Client {
	return scheduler.New(scheduler.Options{
		Region: localscheduler.Region, BaseEndpoint: aws.String(srv.Endpoint()), RetryMaxAttempts: 1,
		Credentials: credentials.NewStaticCredentialsProvider(localscheduler.AccessKeyID, localscheduler.SecretAccessKey, ""),
	})
}

func oneTime(name, at string) *scheduler.CreateScheduleInput {
	return &scheduler.CreateScheduleInput{
		Name: aws.String(name), GroupName: aws.String("inbox"), ScheduleExpression: aws.String("at(" + at + ")"),
		ScheduleExpressionTimezone: aws.String("UTC"), FlexibleTimeWindow: &types.FlexibleTimeWindow{Mode: types.FlexibleTimeWindowModeOff},
		ActionAfterCompletion: types.ActionAfterCompletionDelete,
		Target: &types.Target{
			Arn: aws.String("arn:aws:lambda:us-east-1:123456789012:function:processor"), RoleArn: aws.String("arn:aws:iam::123456789012:role/scheduler"),
			Input:       aws.String(`{"wake":"schedule"}`),
			RetryPolicy: &types.RetryPolicy{MaximumEventAgeInSeconds: aws.Int32(3600), MaximumRetryAttempts: aws.Int32(10)},
		},
	}
}

// TestTheSDKClientCreatesGetsListsDeletes: the real client creates a
// one-time schedule, reads it back as given, lists it, meets
// ConflictException for its name in its group (another group may reuse
// it), ResourceNotFoundException once it is deleted, and ValidationException
// for what the service refuses.
func TestTheSDKClientCreatesGetsListsDeletes(t *testing.T) {
	t.Parallel()
	srv, err := localscheduler.Start(localscheduler.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	ctx, c := t.Context(), client(srv)

	out, err := c.CreateSchedule(ctx, oneTime("processor-20261203T1015", "2026-12-03T10:15:00"))
	if err != nil || aws.ToString(out.ScheduleArn) != "arn:aws:scheduler:us-east-1:123456789012:schedule/inbox/processor-20261203T1015" {
		t.Fatalf("create: %v %v", out, err)
	}
	got, err := c.GetSchedule(ctx, &scheduler.GetScheduleInput{Name: aws.String("processor-20261203T1015"), GroupName: aws.String("inbox")})
	if err != nil {
		t.Fatalf("get: %v", err)
	}
	if !field.Check(t, "get",
		field.Eq("ScheduleExpression", aws.ToString(got.ScheduleExpression), "at(2026-12-03T10:15:00)"),
		field.Eq("ScheduleExpressionTimezone", aws.ToString(got.ScheduleExpressionTimezone), "UTC"),
		field.Eq("ActionAfterCompletion", got.ActionAfterCompletion, types.ActionAfterCompletionDelete),
		field.Eq("FlexibleTimeWindow.Mode", got.FlexibleTimeWindow.Mode, types.FlexibleTimeWindowModeOff),
		field.Eq("Target.Input", aws.ToString(got.Target.Input), `{"wake":"schedule"}`),
		field.Eq("Target.RetryPolicy.MaximumRetryAttempts", aws.ToInt32(got.Target.RetryPolicy.MaximumRetryAttempts), 10),
		field.Eq("State", got.State, types.ScheduleStateEnabled),
		field.Is("CreationDate", got.CreationDate, got.CreationDate != nil, "set"),
	) {
		t.FailNow()
	}
	if sc, ok := srv.Get("inbox", "processor-20261203T1015"); !ok || !sc.At.Equal(time.Date(2026, 12, 3, 10, 15, 0, 0, time.UTC)) {
		t.Fatalf("recorded %+v", sc)
	}

	var conflict *types.ConflictException
	if _, err := c.CreateSchedule(ctx, oneTime("processor-20261203T1015", "2026-12-03T10:16:00")); !errors.As(err, &conflict) {
		t.Fatalf("a second create of the name: %v, want ConflictException", err)
	}
	other := oneTime("processor-20261203T1015", "2026-12-03T10:15:00")
	other.GroupName = aws.String("other")
	if _, err := c.CreateSchedule(ctx, other); err != nil {
		t.Fatalf("the name in another group: %v", err)
	}
	list, err := c.ListSchedules(ctx, &scheduler.ListSchedulesInput{GroupName: aws.String("inbox"), NamePrefix: aws.String("processor-")})
	if err != nil || len(list.Schedules) != 1 || aws.ToString(list.Schedules[0].Target.Arn) != "arn:aws:lambda:us-east-1:123456789012:function:processor" {
		t.Fatalf("list: %+v %v", list, err)
	}

	if _, err := c.DeleteSchedule(ctx, &scheduler.DeleteScheduleInput{Name: aws.String("processor-20261203T1015"), GroupName: aws.String("inbox")}); err != nil {
		t.Fatal(err)
	}
	var notFound *types.ResourceNotFoundException
	if _, err := c.GetSchedule(ctx, &scheduler.GetScheduleInput{Name: aws.String("processor-20261203T1015"), GroupName: aws.String("inbox")}); !errors.As(err, &notFound) {
		t.Fatalf("get after delete: %v", err)
	}

	var invalid *types.ValidationException
	for name, edit := range map[string]func(*scheduler.CreateScheduleInput){
		// The SDK itself refuses a missing FlexibleTimeWindow or RoleArn.
		"bad action":   func(in *scheduler.CreateScheduleInput) { in.ActionAfterCompletion = "KEEP" },
		"bad at":       func(in *scheduler.CreateScheduleInput) { in.ScheduleExpression = aws.String("at(2026-13-03T10:15:00)") },
		"bad window":   func(in *scheduler.CreateScheduleInput) { in.FlexibleTimeWindow.Mode = "SOMETIMES" },
		"bad timezone": func(in *scheduler.CreateScheduleInput) { in.ScheduleExpressionTimezone = aws.String("Mars/Olympus") },
		"long age": func(in *scheduler.CreateScheduleInput) {
			in.Target.RetryPolicy.MaximumEventAgeInSeconds = aws.Int32(86401)
		},
	} {
		in := oneTime("x-"+strings.ReplaceAll(name, " ", "-"), "2026-12-03T10:15:00")
		edit(in)
		if _, err := c.CreateSchedule(ctx, in); !errors.As(err, &invalid) {
			t.Errorf("%s: %v, want ValidationException", name, err)
		}
	}
}

// TestUnsignedRequestsAreRefused: a request not signed for the service is
// refused; the stand-in serves the loopback only.
func TestUnsignedRequestsAreRefused(t *testing.T) {
	t.Parallel()
	srv, err := localscheduler.Start(localscheduler.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	if !strings.HasPrefix(srv.Endpoint(), "http://127.0.0.1:") {
		t.Fatalf("endpoint %s", srv.Endpoint())
	}
	resp, err := http.Get(srv.Endpoint() + "/schedules")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusForbidden || resp.Header.Get("X-Amzn-ErrorType") != "AccessDeniedException" || srv.Requests() != 0 {
		t.Fatalf("unsigned: %s %s", resp.Status, resp.Header.Get("X-Amzn-ErrorType"))
	}
}

// TestFireDue: schedules fire when the clock reaches their time, in time
// order, each once; a DELETE schedule is gone after it fired, a failed
// target is fired again until its maximum event age has passed.
func TestFireDue(t *testing.T) {
	t.Parallel()
	clk := &clock{t: time.Date(2026, 12, 3, 10, 14, 30, 0, time.UTC)}
	var mu sync.Mutex
	var fired []string
	failing := true
	srv, err := localscheduler.Start(localscheduler.Options{Now: clk.now, Fire: func(_ context.Context, s localscheduler.Schedule) error {
		mu.Lock()
		defer mu.Unlock()
		fired = append(fired, s.Name+" "+s.Target.Input)
		if s.Name == "archiver-20261203T1016" && failing {
			return errors.New("throttled")
		}
		return nil
	}})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	ctx, c := t.Context(), client(srv)
	for name, at := range map[string]string{"processor-20261203T1015": "2026-12-03T10:15:00", "archiver-20261203T1016": "2026-12-03T10:16:00"} {
		in := oneTime(name, at)
		in.Target.RetryPolicy.MaximumEventAgeInSeconds = aws.Int32(120)
		if _, err := c.CreateSchedule(ctx, in); err != nil {
			t.Fatal(err)
		}
	}
	keep := oneTime("processor-keep", "2026-12-03T10:15:00")
	keep.ActionAfterCompletion = types.ActionAfterCompletionNone
	if _, err := c.CreateSchedule(ctx, keep); err != nil {
		t.Fatal(err)
	}

	if f := srv.FireDue(ctx); len(f) != 0 {
		t.Fatalf("fired before its time: %v", f)
	}
	clk.set(time.Date(2026, 12, 3, 10, 16, 0, 0, time.UTC))
	if f := srv.FireDue(ctx); len(f) != 3 || f[2].Schedule.Name != "archiver-20261203T1016" || f[2].Err == nil {
		t.Fatalf("fired %+v", f)
	}
	if _, ok := srv.Get("inbox", "processor-20261203T1015"); ok {
		t.Fatal("a DELETE schedule is kept after it fired")
	}
	if sc, ok := srv.Get("inbox", "processor-keep"); !ok || sc.State != "DISABLED" {
		t.Fatalf("a NONE schedule after it fired: %+v %v", sc, ok)
	}
	// The failed one again, and again until it is too old.
	clk.set(time.Date(2026, 12, 3, 10, 17, 0, 0, time.UTC))
	if f := srv.FireDue(ctx); len(f) != 1 || f[0].Schedule.Name != "archiver-20261203T1016" {
		t.Fatalf("retry fired %+v", f)
	}
	clk.set(time.Date(2026, 12, 3, 10, 18, 0, 0, time.UTC))
	srv.FireDue(ctx)
	if _, ok := srv.Get("inbox", "archiver-20261203T1016"); ok {
		t.Fatal("a schedule past its maximum event age is kept")
	}
	mu.Lock()
	defer mu.Unlock()
	if len(fired) != 5 || fired[0] != `processor-20261203T1015 {"wake":"schedule"}` {
		t.Fatalf("fired %v", fired)
	}
	if len(srv.Fired()) != 5 {
		t.Fatalf("recorded %d firings", len(srv.Fired()))
	}
}
