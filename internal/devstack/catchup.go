package devstack

import (
	"context"
	"fmt"
	"io"
	"strings"

	"github.com/webhook-inbox/webhook-inbox/shared/inbox"
	"github.com/webhook-inbox/webhook-inbox/shared/operations"
	"github.com/webhook-inbox/webhook-inbox/shared/processor"
	"github.com/webhook-inbox/webhook-inbox/shared/storage"
)

// CatchUpActor is who the start-up replay is recorded as
// (webhookctl actions lists it).
const CatchUpActor = "webhookdev dev (start-up)"

// CatchUp says, at start-up, what arrived while the stack was down and
// what came before its handler, and deals with both as a developer
// restarting after adding a handler expects:
//
//   - unprocessed events (received while it was down, or waiting for a
//     retry) need nothing: the processor drains them as it starts, so
//     they are only counted;
//   - events processed without a handler (outcome unhandled, the default
//     UnhandledPolicy) stay so for ever unless replayed. Those whose
//     source, kind and type reg now routes to a handler are replayed
//     when replay is set (the dev stack's default; the replay is recorded
//     as CatchUpActor's), and otherwise the command that replays them is
//     printed.
//
// store is the operator's (a replay is an operator's action, and the
// operator's role has its grants); it writes at most a few lines to out.
func CatchUp(ctx context.Context, out io.Writer, store *storage.Store, reg *processor.Registry, replay bool) error {
	now, err := store.PGNow(ctx)
	if err != nil {
		return fmt.Errorf("catch up: %w", err)
	}
	backlog, err := store.EventGetBacklogStats(ctx, now)
	if err != nil {
		return fmt.Errorf("catch up: %w", err)
	}
	if backlog.Count > 0 {
		fmt.Fprintf(out, "backlog: %d events wait to be processed (received while the stack was down, or retrying): the processor drains them now\n", backlog.Count)
	}

	groups, err := store.EventCountUnhandledByRoute(ctx)
	if err != nil {
		return fmt.Errorf("catch up: %w", err)
	}
	var routed []storage.UnhandledCount
	var waiting int64
	for _, g := range groups {
		// A replay selects by type, and an empty type selects every
		// type: events without one are left to webhookctl replay --id.
		if g.EventType == "" {
			continue
		}
		if _, ok := reg.Lookup(g.Source, g.SourceKind, g.EventType); ok {
			routed = append(routed, g)
			waiting += g.Count
		}
	}
	if len(routed) == 0 {
		return nil
	}
	if !replay {
		fmt.Fprintf(out, "unhandled: %d events came before their handler; to run it on them: %s\n", waiting, replayCommands(routed))
		return nil
	}

	svc, err := operations.New(operations.Config{Access: operations.AccessAct}, operations.Deps{Store: store})
	if err != nil {
		return fmt.Errorf("catch up: %w", err)
	}
	ctx = operations.WithOperator(ctx, operations.Operator{Name: CatchUpActor})
	var total int
	var done []string
	for _, g := range routed {
		n, err := replayAll(ctx, svc, operations.ReplaySelection{Source: g.Source, Type: g.EventType, Outcome: string(inbox.OutcomeUnhandled)})
		total += n
		if n > 0 {
			done = append(done, fmt.Sprintf("%s %s (%d)", g.Source, g.EventType, n))
		}
		if err != nil {
			return fmt.Errorf("catch up: replay the unhandled %q events of source %s: %w", g.EventType, g.Source, err)
		}
	}
	if total > 0 {
		fmt.Fprintf(out, "replayed %d events now handled by a handler registered since they came: %s (--replay-unhandled=false leaves them)\n",
			total, strings.Join(done, ", "))
	}
	return nil
}

// replayAll replays sel to the end (a replay of many events is several
// calls under one record) and returns how many events it reset.
func replayAll(ctx context.Context, svc *operations.Service, sel operations.ReplaySelection) (int, error) {
	req := operations.ReplayRequest{Select: sel, Reason: "make dev: the events came before their handler"}
	n := 0
	for {
		res, err := svc.Replay(ctx, req)
		if err != nil {
			return n, err
		}
		n += res.Replayed
		if res.Next == nil {
			return n, nil
		}
		req.Continue = res.Next
	}
}

// replayCommands is the webhookctl command for each route, joined.
func replayCommands(routed []storage.UnhandledCount) string {
	cmds := make([]string, len(routed))
	for i, g := range routed {
		cmds[i] = fmt.Sprintf("go run ./cmd/webhookctl replay --outcome unhandled --source %s --type %s --yes", g.Source, shellWord(g.EventType))
	}
	return strings.Join(cmds, "; ")
}

// shellWord quotes s for a shell unless it is plainly one word.
func shellWord(s string) string {
	if s != "" && strings.Trim(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-/:") == "" {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}
