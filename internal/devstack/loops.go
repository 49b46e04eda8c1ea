package devstack

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"time"

	"github.com/webhook-inbox/webhook-inbox/internal/devstack/lambdalocal"
	"github.com/webhook-inbox/webhook-inbox/shared/archive"
	"github.com/webhook-inbox/webhook-inbox/shared/inbox"
	"github.com/webhook-inbox/webhook-inbox/shared/lambdahttp"
	"github.com/webhook-inbox/webhook-inbox/shared/processor"
)

// What stands in for Lambda under make dev: the components run in this
// process, and the dev stack calls what the Lambda runtime calls, on a
// schedule of its own, since nothing wakes them here. Their packages hold
// no loop for it: deployed, each invocation is one call.

// serveProcessor runs the processor's invocations (processor.Invocation)
// back to back until ctx is done: each a run of cfg.RunFor with its own
// metrics line, as the deployed function's woken invocations are; with
// RunFor 0 each is one drain, and the rest of each schedule period is
// waited out before the next. cfg is the processor's configuration,
// defaults applied. A failed invocation is logged and the next one runs,
// as Lambda would run the next wake-up's; it returns nil when ctx is done
// or its deadline's margin is reached.
func serveProcessor(ctx context.Context, p *processor.Processor, cfg processor.Config, schedule time.Duration, log *slog.Logger) error {
	if cfg.RunFor <= 0 && schedule <= 0 {
		return errors.New("processor: without a run time (RunFor), the schedule period must be positive")
	}
	for {
		next := time.Now().Add(schedule)
		st, err := p.Invocation(ctx)
		switch {
		case ctx.Err() != nil, st.Stopped == processor.StopDeadline:
			return nil
		case err != nil:
			log.Error("processor: invocation failed; the next one retries", "cause", inbox.CauseDatabaseUnavailable,
				"err", err, "handled", st.Handled)
		}
		if cfg.RunFor > 0 {
			// The run itself waited between its polls, failed or not.
			continue
		}
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(time.Until(next)):
		}
	}
}

// archiveEvery runs the archiver (archive.RunOnce) at once and then every
// interval until ctx is done. A failed run is logged by RunOnce and
// retried at the next interval: nothing it leaves behind needs more.
func archiveEvery(ctx context.Context, a *archive.Archiver, interval time.Duration) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		_, _ = a.RunOnce(ctx)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// asLambda serves h as its function is served deployed: each request
// becomes the API Gateway HTTP API event the function would be given
// (lambdalocal.NewEvent, every path on the catch-all route), which the
// function's own Lambda handler handles (lambdahttp.Handler, with ew
// answering what h does not: a panic is ew's answer, cause internal), and
// the handler's response is written back as API Gateway writes it. A body
// over API Gateway's limit gets API Gateway's 413; a body that fails to
// arrive (the server's read timeout) is answered by ew, cause
// unreadable_body, as h answers one.
func asLambda(h http.Handler, ew lambdahttp.ErrorWriter) http.Handler {
	fn := lambdahttp.Handler(h, ew)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ev, err := lambdalocal.NewEvent(r, "$default")
		switch {
		case errors.Is(err, lambdalocal.ErrTooLarge):
			lambdalocal.WriteResponse(w, lambdalocal.TooLarge)
			return
		case err != nil:
			ew.WriteError(w, r, inbox.WrapError(inbox.CauseUnreadableBody, err, "the body could not be read"))
			return
		}
		// The handler answers every outcome, its own failures included,
		// as a response; it never returns an error.
		resp, _ := fn(r.Context(), ev)
		lambdalocal.WriteResponse(w, resp)
	})
}
