// Package processor applies stored webhook events exactly once.
//
// The receiver stores each delivery once; the processor applies each stored
// event once: it runs the event's business logic and sets processed_at in
// one transaction, so an event is either fully applied or not at all, and
// keeps that promise when processors overlap, time out, crash mid-batch or
// meet a poison event.
//
// Business logic registers in a [Registry], per source name or source kind
// and event type, with a fallback. A [Handler] receives the event and the
// open pgx.Tx and makes its changes in it; it never commits.
//
// [Processor.Drain] loops while there is work and time:
//
//  1. Claim a small batch of due events (unprocessed, not dead,
//     next_attempt_at reached), oldest first, with FOR UPDATE SKIP LOCKED,
//     and commit the claim at once with a lease (locked_until) and a claim
//     token (locked_by). Concurrent processors take disjoint batches; the
//     rows of a processor that dies become claimable when its lease passes.
//  2. For each event, while it fits in both the lease and the time left
//     before the context's deadline: count the attempt in a statement of its
//     own (so a handler that kills its processor still spends an attempt),
//     then, in the event's own transaction, mark it processed (which locks
//     the row and checks that it is still unprocessed and still ours), run
//     the handler, commit. One event's failure never undoes another's work.
//  3. On failure, roll back, then record the error in the event's history
//     and schedule the next attempt with exponential backoff and full
//     jitter, outside the rolled-back transaction. A panic is such a
//     failure, of that event only. A [Permanent] error, or the failure of
//     the last of MaxAttempts, moves the event to webhook_dead_letters with
//     its payload and history.
//  4. Events of the batch that no longer fit are released, due at once.
//
// Exactly once rests on one rule: the handler's changes and processed_at
// commit together, and the UPDATE that sets processed_at only matches an
// unprocessed row claimed with this processor's token, under the row lock it
// takes. Leases only decide who may try next; they are never what prevents a
// second application.
//
// Every time the processor writes or compares (lease ends, due times,
// processed_at) comes from its clock (Config.Now), passed to SQL as a
// parameter: tests move the clock instead of sleeping. In production it is
// the wall clock of each processor, so clocks should be NTP-synchronised, as
// Lambda's are; skew only shifts when a row is seen as due, never whether it
// is applied once.
//
// [Processor.Run] keeps a processor draining in real time: whenever a drain
// finds nothing due it waits Config.PollInterval and drains again, until a
// given time, so an event's handler starts within about that interval of
// its receipt. [Processor.Invocation] is what one scheduled Lambda
// invocation runs (Run for Config.RunFor, or one Drain), [Processor.Serve]
// runs invocations back to back for make dev.
//
// See docs/processor.md, and the example handlers in shared/handlers.
package processor
