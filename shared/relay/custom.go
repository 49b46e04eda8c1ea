package relay

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/webhook-inbox/webhook-inbox/shared/cfnresponse"
)

// The custom resource the relay answers for.
const (
	// ResourceType is the stack's resource: its Create and Update copy the
	// sources document and arm a processor wake-up a minute on; its Delete
	// deletes the copy and empties the control bucket's prefixes. Its properties are not read (the relay's
	// environment says what to copy): give it one that changes with the
	// secret (its ARN) to have CloudFormation send Update when it does.
	ResourceType = "Custom::SourcesCopy"
	// PhysicalResourceID is the resource's id in every answer.
	PhysicalResourceID = "webhook-inbox-sources-copy"
	// The answer's Data: the copy's key and the secret's version copied.
	DataSourcesKey    = "SourcesKey"
	DataSecretVersion = "SecretVersionId"
)

// customResource answers CloudFormation's request. The work is bounded by
// the invocation's deadline less the answer's reserve (cfnresponse), so an
// answer always goes out; the invocation fails only when it could not be
// delivered, so that Lambda retries it.
func (r *Relay) customResource(ctx context.Context, req cfnresponse.Request) (Outcome, error) {
	start := time.Now()
	rt := string(req.RequestType)
	// Never the ResponseURL: it is pre-signed, whoever holds it may answer.
	r.log.Info("relay: custom resource request", "request_type", rt, "resource_type", req.ResourceType,
		"logical_resource_id", req.LogicalResourceID, "request_id", req.RequestID, "stack_id", req.StackID)
	out := Outcome{Event: "custom_resource"}
	// Only CloudFormation's own pre-signed URL is answered, and nothing is
	// done for a request naming another: whoever may invoke the function
	// is not CloudFormation, and a Delete empties the control bucket.
	if err := cfnresponse.CheckResponseURL(req.ResponseURL, r.cfg.LocalResponseURL); err != nil {
		err = fmt.Errorf("relay: custom resource request refused, nothing done: %w", err)
		r.log.Error("relay: custom resource request refused", "cause", CauseRefusedRequest, "request_id", req.RequestID, "err", err)
		return out, err
	}
	resp := cfnresponse.For(req, PhysicalResourceID)
	work, reserve, cancel := cfnresponse.WorkContext(ctx)
	defer cancel()

	switch {
	case req.ResourceType != ResourceType && rt == cfnresponse.RequestDelete:
		// Nothing of ours to delete; a FAILED Delete would block the stack.
		resp.Status, resp.Reason = cfnresponse.StatusSuccess, fmt.Sprintf("nothing deleted: the relay answers for %s, not %s", ResourceType, req.ResourceType)
	case req.ResourceType != ResourceType:
		resp.Status, resp.Reason = cfnresponse.StatusFailed, fmt.Sprintf("%s failed: the relay answers for %s, not %s", rt, ResourceType, req.ResourceType)
	case rt == cfnresponse.RequestCreate || rt == cfnresponse.RequestUpdate:
		version, err := r.Copy(work)
		out.Copied = version
		if err != nil {
			resp.Status, resp.Reason = cfnresponse.StatusFailed, rt+" failed: "+failure(work, reserve, err)
		} else {
			resp.Status = cfnresponse.StatusSuccess
			resp.Reason = fmt.Sprintf("copied version %s of the sources secret to s3://%s/%s", version, r.cfg.ControlBucket, r.cfg.SourcesKey)
			resp.Data = map[string]string{DataSourcesKey: r.cfg.SourcesKey, DataSecretVersion: version}
			// A deploy may leave events stored and not processed (those of
			// a release whose processor polled, or that arrived while the
			// processor was replaced): a wake-up a minute on finds them,
			// whether or not another event ever arrives. It never fails the
			// deploy; the next receipt wakes the processor anyway.
			if name, err := r.schedule(work, TargetProcessor, r.now()); err != nil {
				r.log.Warn("relay: the processor's wake-up after the deploy could not be armed", "cause", CauseScheduleFailed, "err", err)
			} else {
				out.Armed = append(out.Armed, name)
			}
		}
	case rt == cfnresponse.RequestDelete:
		n, err := r.empty(work)
		out.Deleted = n
		if err != nil {
			r.log.Error("relay: the control bucket could not be emptied", "cause", CauseEmptyFailed, "bucket", r.cfg.ControlBucket, "deleted", n, "err", err)
			resp.Status, resp.Reason = cfnresponse.StatusFailed, fmt.Sprintf("Delete failed: %d objects deleted under %s and %s of %s, then: %s",
				n, WakePrefix, ConfigPrefix, r.cfg.ControlBucket, failure(work, reserve, err))
		} else {
			resp.Status = cfnresponse.StatusSuccess
			resp.Reason = fmt.Sprintf("deleted %d objects under %s and %s of %s, the sources document's copy included", n, WakePrefix, ConfigPrefix, r.cfg.ControlBucket)
		}
	default:
		resp.Status, resp.Reason = cfnresponse.StatusFailed, fmt.Sprintf("unknown request type %q", rt)
	}
	out.Status = resp.Status

	body, err := r.send.Send(ctx, req.ResponseURL, resp)
	if err != nil {
		r.log.Error("relay: the custom resource's answer could not be delivered", "cause", CauseAnswerFailed, "request_id", req.RequestID,
			"status", resp.Status, "err", err)
		return out, fmt.Errorf("answer CloudFormation: %w", err)
	}
	level := slog.LevelInfo
	if resp.Status != cfnresponse.StatusSuccess {
		level = slog.LevelError
	}
	r.log.Log(ctx, level, "relay: custom resource answer", "request_type", rt, "request_id", req.RequestID, "status", resp.Status,
		"reason", resp.Reason, "bytes", len(body), "duration_ms", time.Since(start).Milliseconds())
	return out, nil
}

// failure says what failed, and that the time ran out when it did.
func failure(work context.Context, reserve time.Duration, err error) string {
	if errors.Is(work.Err(), context.DeadlineExceeded) {
		return fmt.Sprintf("the relay ran out of time (its timeout less %s kept to answer): %v", reserve.Round(time.Millisecond), err)
	}
	return err.Error()
}
