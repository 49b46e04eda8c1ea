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
//  1. One statement says whether an event is due, and whether a claim of
//     a processor that died is past its lease; an idle poll costs nothing
//     more. Expired claims are recovered: each of their events gets an
//     interrupted attempt in its history and runs alone from then on,
//     charged for it only if it ran alone.
//  2. A claim, in a new transaction, locks up to BatchSize due events
//     (FOR NO KEY UPDATE SKIP LOCKED; concurrent processors take disjoint
//     events), or one event that must run alone (one that failed or was
//     interrupted before), and records itself in webhook_claims on the
//     pool's other connection before any handler runs.
//  3. Each event, while it fits in the lease and the time left before the
//     context's deadline, runs its handler in the claim's transaction under
//     a savepoint of its own, taken before the handler's first statement: a
//     failure, panic or timeout rolls back that event's work alone.
//  4. One statement records every outcome (processed, or failed with the
//     next attempt's time after exponential backoff with full jitter, or
//     dead) and a history row per attempt; dead events are copied to
//     webhook_dead_letters; the claim is emptied; the transaction commits.
//     A claim whose transaction fails falls back to one transaction per
//     event under the same claim.
//
// Exactly once rests on one rule: the handler's changes and processed_at
// commit together, in a transaction that has held the event's row lock
// since its claim checked that the event was still to be processed.
// Claims and their leases only say which attempts never finished; they
// are never what prevents a second application.
//
// Every time the processor writes or compares (lease ends, due times,
// processed_at) comes from its clock (Deps.Clock), passed to SQL as a
// parameter: tests move the clock instead of sleeping. In production it is
// the wall clock of each processor, so clocks should be NTP-synchronised, as
// Lambda's are; skew only shifts when a row is seen as due, never whether it
// is applied once.
//
// The deployed processor runs only when woken (shared/wake: after a
// receipt, at an armed retry or lease end, at the sweep, after an
// operator's requeue or replay). [Processor.Run] keeps it draining for a
// while: whenever a drain finds nothing due it waits Config.PollInterval
// and drains again, until a given time, so an event committed meanwhile
// is handled within about that interval, and a receiver that debounces its
// wake-ups leaves nothing behind. [Processor.Invocation] is what one
// invocation runs (Run for Config.RunFor, or one Drain, then the arming of
// what its work left for later); make dev, which has no Lambda to wake,
// calls it back to back itself (internal/devstack).
//
// See docs/processor.md, and the example handlers in shared/handlers.
package processor
