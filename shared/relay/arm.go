package relay

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/scheduler"
	"github.com/aws/aws-sdk-go-v2/service/scheduler/types"
)

// The wake-up schedules' settings.
const (
	// WakeInput is what a schedule sends its target.
	WakeInput = `{"wake":"schedule"}`
	// Lead is how far ahead of now a schedule's time must be: a time that
	// is past or less than a minute ahead is moved to the first whole
	// minute at least Lead ahead. EventBridge Scheduler invokes a target
	// within the minute it names ("60 second precision", schedule-types
	// below); what it does with an at() time already past is not
	// documented, so the relay never asks for one.
	// https://docs.aws.amazon.com/scheduler/latest/UserGuide/schedule-types.html
	Lead = time.Minute
	// MaxEventAge and MaxRetries are the target's retry policy: a wake-up
	// that Lambda throttles is retried for an hour at most, not the
	// default 24 (a wake-up hours late wakes nothing useful: the next
	// marker arms another).
	// https://docs.aws.amazon.com/AWSCloudFormation/latest/TemplateReference/aws-properties-scheduler-schedule-retrypolicy.html
	MaxEventAge = 3600
	MaxRetries  = 10
	// nameLayout is a schedule's name's minute: <target>-<YYYYMMDDTHHMM>.
	nameLayout = "20060102T1504"
	// atExpression is the at() expression's time, in ScheduleTimezone.
	atExpression     = "2006-01-02T15:04:05"
	ScheduleTimezone = "UTC"
)

// ScheduleName is the schedule a marker for target at at arms: one per
// target and minute, so a marker delivered twice (S3 and EventBridge
// deliver at least once) arms one schedule.
func ScheduleName(target string, at time.Time) string {
	return target + "-" + at.UTC().Format(nameLayout)
}

// Clamp returns at, or the first whole minute at least Lead after now when
// at is earlier than that.
func Clamp(at, now time.Time) time.Time {
	earliest := now.Add(Lead)
	if t := earliest.Truncate(time.Minute); t.Before(earliest) {
		earliest = t.Add(time.Minute)
	}
	if at.Before(earliest) {
		return earliest.UTC()
	}
	return at.UTC()
}

// arm creates the schedule of each marker created under ArmPrefix in the
// control bucket. A marker that cannot be read is skipped and logged; a
// schedule that could not be created fails the invocation (after the
// others were tried), so that the event is delivered again.
func (r *Relay) arm(ctx context.Context, objects []objectCreated) (Outcome, error) {
	out := Outcome{Event: "s3"}
	var errs []error
	for _, o := range objects {
		if !o.created || o.bucket != r.cfg.ControlBucket {
			r.log.Debug("relay: not a creation in the control bucket; ignored", "bucket", o.bucket, "key", o.key)
			out.Ignored++
			continue
		}
		target, at, ok, err := parseArmKey(o.key, r.cfg.Targets)
		if err != nil && o.keyErr == nil && strings.Contains(o.key, "%") {
			// S3's EventBridge events are not documented to encode keys
			// as its notifications do (its guide's example key is plain);
			// a key of the relay's own never holds a '%', so one that does
			// is read decoded too.
			if k, uerr := url.PathUnescape(o.key); uerr == nil {
				target, at, ok, err = parseArmKey(k, r.cfg.Targets)
			}
		}
		if o.keyErr != nil {
			err, ok = o.keyErr, true
		}
		switch {
		case err != nil:
			r.log.Warn("relay: a wake-up marker's key cannot be read; skipped", "cause", CauseMalformedKey, "key", o.key, "err", err)
			out.Skipped = append(out.Skipped, fmt.Sprintf("%s: %s", o.key, CauseMalformedKey))
			continue
		case !ok:
			r.log.Debug("relay: not a wake-up marker; ignored", "key", o.key)
			out.Ignored++
			continue
		}
		name, err := r.schedule(ctx, target, at)
		if err != nil {
			r.log.Error("relay: the wake-up schedule could not be created; the event will be retried", "cause", CauseScheduleFailed,
				"schedule", name, "target", target, "err", err)
			errs = append(errs, err)
			continue
		}
		out.Armed = append(out.Armed, name)
	}
	return out, errors.Join(errs...)
}

// schedule creates target's one-time schedule for at (clamped), or finds
// it already there.
func (r *Relay) schedule(ctx context.Context, target string, at time.Time) (string, error) {
	name := ScheduleName(target, at)
	now := r.now()
	when := Clamp(at, now)
	_, err := r.deps.Scheduler.CreateSchedule(ctx, &scheduler.CreateScheduleInput{
		Name:                       aws.String(name),
		GroupName:                  aws.String(r.cfg.ScheduleGroup),
		ScheduleExpression:         aws.String("at(" + when.Format(atExpression) + ")"),
		ScheduleExpressionTimezone: aws.String(ScheduleTimezone),
		FlexibleTimeWindow:         &types.FlexibleTimeWindow{Mode: types.FlexibleTimeWindowModeOff},
		ActionAfterCompletion:      types.ActionAfterCompletionDelete,
		Target: &types.Target{
			Arn:         aws.String(r.cfg.Targets[target]),
			RoleArn:     aws.String(r.cfg.SchedulerRoleARN),
			Input:       aws.String(WakeInput),
			RetryPolicy: &types.RetryPolicy{MaximumEventAgeInSeconds: aws.Int32(MaxEventAge), MaximumRetryAttempts: aws.Int32(MaxRetries)},
		},
	})
	var conflict *types.ConflictException
	switch {
	case errors.As(err, &conflict):
		// Already armed: a marker delivered again, or another for the
		// same minute.
		r.log.Debug("relay: the wake-up schedule is already there", "schedule", name)
		return name, nil
	case err != nil:
		return name, fmt.Errorf("create schedule %s/%s: %w", r.cfg.ScheduleGroup, name, err)
	}
	r.log.Info("relay: wake-up armed", "schedule", name, "target", target, "at", when.Format(time.RFC3339),
		"clamped", !when.Equal(at), "lead_ms", when.Sub(now).Milliseconds())
	return name, nil
}
