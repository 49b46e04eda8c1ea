package migrate

// The database roles of the functions, one each, so that each connects
// with only the privileges its own statements use: code execution in the
// internet-facing receiver can then neither read stored bodies nor change
// or drop a table, and the read-only operator function cannot change
// anything whatever its code does. Roles creates them and grants them; none
// of them owns anything, so none can create, alter or drop a table.
const (
	// RoleReceiver is the receiver's role: it stores events, payload
	// mismatches and rejections, and reads back only the dedup key and the
	// hash of an event it already holds.
	RoleReceiver = "webhook_receiver"
	// RoleProcessor is the processor's role: it claims and marks events,
	// writes dead letters, and runs the handlers' statements on their
	// tables.
	RoleProcessor = "webhook_processor"
	// RoleArchiver is the archiver's role: it reads processed events, points
	// them at their S3 object and clears their bodies, and keeps the
	// archive's manifest.
	RoleArchiver = "webhook_archiver"
	// RoleOperatorRead is the read-only operator function's role
	// (OPERATOR_ACCESS=read): it reads every core table, bodies included,
	// and writes nothing, so read-only holds in the database, not only in
	// the function's code.
	RoleOperatorRead = "webhook_operator_read"
	// RoleOperator is the acting operator function's role
	// (OPERATOR_ACCESS=act): the reads, plus the columns a requeue, a
	// replay, an expunge and an archive run write, and their records.
	RoleOperator = "webhook_operator"
)

// FunctionRoles lists the roles, in the order Roles sets them up.
func FunctionRoles() []string {
	return []string{RoleReceiver, RoleProcessor, RoleArchiver, RoleOperatorRead, RoleOperator}
}

// Grant is a set of privileges of one function role on one table or
// sequence of the current schema.
type Grant struct {
	Role string
	// On is the table or the sequence.
	On string
	// Privileges on a table: SELECT, INSERT, UPDATE, DELETE; on a
	// sequence: USAGE (nextval, including a serial column's default).
	// TRUNCATE, REFERENCES and TRIGGER are never granted: the first empties
	// a table without row checks, the others create objects.
	Privileges []string
	// Columns, when set, limit the privileges to these columns of the
	// table.
	Columns []string
	// Sequences, on a table grant that holds INSERT, also grants USAGE on
	// every sequence the table owns (its serial and identity columns':
	// what nextval, a serial column's default, needs), found in the
	// catalogue at each run (OwnedSequences), so that a handler package's
	// Tables need not name them and they come and go with the table's
	// grant.
	Sequences bool
}

// CoreGrants returns what each function's statements need on the core
// tables (shared/storage/queries), and nothing more. Where a function uses
// a few columns of a table that holds what it must not see (the receiver
// and webhook_events' bodies), the grant names the columns.
//
// A new query that needs more fails, as the function's role, in the tests
// of shared/dbschema (TestReceiverRunsAsItsRole, ...,
// TestOperatorReadRunsAsItsRole, TestOperatorRunsAsItsRole) before it
// fails a deploy: add its privilege here.
func CoreGrants() []Grant {
	grants := []Grant{
		// The receiver: EventInsert (and EventGetHashByKey after a lost
		// race) inserts the delivery and, for a duplicate, reads the stored
		// row's id and hash by its key; for a suspected replay
		// (EventGetByBodyHash), the stored row's id, event id and type by
		// its body's hash; never a payload or a body.
		{Role: RoleReceiver, On: "webhook_events", Privileges: []string{"INSERT"},
			Columns: []string{"provider", "event_id", "event_type", "payload", "body", "body_sha256", "body_size", "metadata", "source_kind", "body_guard"}},
		{Role: RoleReceiver, On: "webhook_events", Privileges: []string{"SELECT"},
			Columns: []string{"id", "provider", "event_id", "event_type", "body_sha256", "body_guard"}},
		{Role: RoleReceiver, On: "webhook_events_id_seq", Privileges: []string{"USAGE"}},
		// PayloadMismatchInsert, which counts the stored event's records
		// (its cap) by their key.
		{Role: RoleReceiver, On: "webhook_payload_mismatches", Privileges: []string{"INSERT"},
			Columns: []string{"provider", "event_id", "stored_sha256", "received_sha256", "received_size", "cause", "received_event_id", "received_event_type"}},
		{Role: RoleReceiver, On: "webhook_payload_mismatches", Privileges: []string{"SELECT"},
			Columns: []string{"provider", "event_id"}},
		{Role: RoleReceiver, On: "webhook_payload_mismatches_id_seq", Privileges: []string{"USAGE"}},
		// RejectionInsert: an upsert into the ring buffer, slot from the
		// sequence. ON CONFLICT ... DO UPDATE reads the conflicting row and
		// the proposed one (EXCLUDED), which takes SELECT on their columns;
		// the buffer holds nothing secret (see migration 00002).
		{Role: RoleReceiver, On: "webhook_rejections", Privileges: []string{"INSERT", "SELECT"},
			Columns: []string{"slot", "provider", "cause", "message", "request_id", "remote_addr", "body_size", "suppressed", "received_at"}},
		{Role: RoleReceiver, On: "webhook_rejections", Privileges: []string{"UPDATE"},
			Columns: []string{"provider", "cause", "message", "request_id", "remote_addr", "body_size", "suppressed", "received_at"}},
		{Role: RoleReceiver, On: "webhook_rejections_seq", Privileges: []string{"USAGE"}},
		// SourceActivityRecord: the receiver's sources and their last
		// deliveries. Its upsert reads the conflicting row (SELECT), and it
		// marks the sources no longer configured; nothing in it is secret.
		{Role: RoleReceiver, On: "webhook_source_activity", Privileges: []string{"SELECT", "INSERT", "UPDATE"}},
		// QuarantineInsert keeps a delivery refused for its signature or
		// its signed time, within its source's cap, which it counts by the
		// provider column alone: the receiver never reads a kept body.
		{Role: RoleReceiver, On: "webhook_quarantine", Privileges: []string{"INSERT"},
			Columns: []string{"provider", "source_kind", "cause", "request_id", "received_at", "headers", "body", "body_sha256", "body_size"}},
		{Role: RoleReceiver, On: "webhook_quarantine", Privileges: []string{"SELECT"}, Columns: []string{"provider"}},
		{Role: RoleReceiver, On: "webhook_quarantine_id_seq", Privileges: []string{"USAGE"}},

		// The processor: the claims (EventClaimBatch, EventClaimSolo) read
		// and lock whole rows (a handler gets the body; FOR NO KEY UPDATE
		// needs an UPDATE privilege), EventFinish and the recovery of
		// interrupted claims write the processing columns only, and
		// EventGetBacklog counts.
		{Role: RoleProcessor, On: "webhook_events", Privileges: []string{"SELECT"}},
		{Role: RoleProcessor, On: "webhook_events", Privileges: []string{"UPDATE"},
			Columns: []string{"attempts", "failed_attempts", "solo", "last_attempt_at", "next_attempt_at", "last_error", "outcome", "processed_at", "dead_at",
				"held_by", "held_due_at"}},
		// The pauses: the processor reads them once per claim, and holds
		// (EventHoldClaimed: held_by, held_due_at and next_attempt_at) the
		// claimed events they cover instead of running them.
		{Role: RoleProcessor, On: "webhook_pauses", Privileges: []string{"SELECT"}},
		// The attempt history: the processor appends to it (and reads it
		// for a dead letter's copy); it never changes a row.
		{Role: RoleProcessor, On: "webhook_attempts", Privileges: []string{"SELECT", "INSERT"}},
		// The claims are the processors' own: each writes its row, and
		// empties (or, long idle, deletes) the rows of processors that died.
		{Role: RoleProcessor, On: "webhook_claims", Privileges: []string{"SELECT", "INSERT", "UPDATE", "DELETE"}},
		// EventDeadLetter copies the event into a dead letter and returns
		// its id; the open dead letters are a gauge of every drain.
		{Role: RoleProcessor, On: "webhook_dead_letters", Privileges: []string{"INSERT"},
			Columns: []string{"event_pk", "provider", "event_id", "event_type", "payload", "body", "attempts", "errors", "last_error", "dead_at"}},
		{Role: RoleProcessor, On: "webhook_dead_letters", Privileges: []string{"SELECT"}, Columns: []string{"id", "event_pk", "requeued_at", "resolved_at", "dead_at"}},
		{Role: RoleProcessor, On: "webhook_dead_letters_id_seq", Privileges: []string{"USAGE"}},
		// SourceActivityList, at the end of each run: the configured
		// sources (the metrics' source dimension) and which are silent.
		{Role: RoleProcessor, On: "webhook_source_activity", Privileges: []string{"SELECT"}},

		// The archiver: EventListArchiveCandidates and EventLockForArchive
		// read and lock processed rows (FOR NO KEY UPDATE needs an UPDATE
		// privilege), EventMarkArchived writes the archive columns and
		// clears the payload and body.
		{Role: RoleArchiver, On: "webhook_events", Privileges: []string{"SELECT"}},
		// The retention pass (EventExpireArchived, EventExpireBodies) marks
		// rows body_expired_at and clears their payload and body, and their
		// dead letters' copies of both.
		{Role: RoleArchiver, On: "webhook_events", Privileges: []string{"UPDATE"},
			Columns: []string{"archive_key", "archive_offset", "archive_length", "archived_at", "payload", "body", "body_expired_at"}},
		{Role: RoleArchiver, On: "webhook_dead_letters", Privileges: []string{"SELECT", "UPDATE"}, Columns: []string{"payload", "body"}},
		{Role: RoleArchiver, On: "webhook_dead_letters", Privileges: []string{"SELECT"}, Columns: []string{"event_pk"}},
		// Its bloat gauges read the planner's statistics, which PostgreSQL
		// shows only for tables the role may read: the attempt history and
		// the claims grow and churn with the inbox. Neither holds a body.
		{Role: RoleArchiver, On: "webhook_attempts", Privileges: []string{"SELECT"}},
		{Role: RoleArchiver, On: "webhook_claims", Privileges: []string{"SELECT"}},
		// The manifest is the archiver's own: prepare, lock, commit (with
		// its events' span), the orphan sweep's delete, and the retention
		// pass's expired_at.
		{Role: RoleArchiver, On: "webhook_archive_objects", Privileges: []string{"SELECT", "DELETE"}},
		{Role: RoleArchiver, On: "webhook_archive_objects", Privileges: []string{"INSERT"}, Columns: []string{"key", "provider"}},
		{Role: RoleArchiver, On: "webhook_archive_objects", Privileges: []string{"UPDATE"},
			Columns: []string{"committed_at", "event_count", "size", "sha256", "first_id", "last_id", "last_received_at", "expired_at"}},

		// The acting operator: what its actions write, beyond the reads
		// both operator roles share (below).
		//
		// webhook_events: DeadLetterRequeue makes the dead event live
		// (dead_at, failed_attempts, last_error, next_attempt_at);
		// EventReplay makes a processed one unprocessed (processed_at,
		// outcome, failed_attempts, last_error, next_attempt_at);
		// DeadLetterResolve and EventDiscard finish one without running it
		// (dead_at, processed_at, outcome);
		// EventExpunge erases (payload, body, metadata, last_error) and
		// stamps it (expunged_at, and outcome and processed_at of an
		// unprocessed one); an archive run's EventMarkArchived writes the
		// archive columns and clears payload and body, and its retention
		// pass sets body_expired_at. An expunge's
		// EventGetByKeyForUpdate and the run's FOR NO KEY UPDATE locks need
		// an UPDATE privilege too. Never the key, the hash, the type or the
		// attempt counts.
		{Role: RoleOperator, On: "webhook_events", Privileges: []string{"UPDATE"},
			Columns: []string{"dead_at", "failed_attempts", "last_error", "next_attempt_at", "processed_at", "outcome",
				"payload", "body", "metadata", "expunged_at", "archive_key", "archive_offset", "archive_length", "archived_at", "body_expired_at",
				"held_by", "held_due_at"}},
		// A pause writes its row and holds its source's waiting events
		// (EventHoldSource); a resume deletes the row and releases them
		// (EventRelease): held_by, held_due_at and next_attempt_at.
		{Role: RoleOperator, On: "webhook_pauses", Privileges: []string{"INSERT", "DELETE"}},
		// AttemptExpunge redacts an expunged event's attempt errors; the
		// history is otherwise never changed.
		{Role: RoleOperator, On: "webhook_attempts", Privileges: []string{"UPDATE"}, Columns: []string{"error"}},
		// DeadLetterRequeue marks the dead letters requeued, and
		// DeadLetterResolve resolved;
		// DeadLetterExpunge erases their copies of the body and their
		// error texts. Never inserts one: only the processor does.
		{Role: RoleOperator, On: "webhook_dead_letters", Privileges: []string{"UPDATE"},
			Columns: []string{"requeued_at", "resolved_at", "payload", "body", "last_error", "errors"}},
		// Every action's record: OperatorActionRecord (an expunge) inserts
		// it whole, OperatorActionInsert starts one done in chunks (a
		// replay, a requeue, a resolve, a discard) and each chunk adds its
		// events to its count.
		// at and db_user keep their defaults: the time and the role are
		// the server's to say, never the caller's.
		{Role: RoleOperator, On: "webhook_operator_actions", Privileges: []string{"INSERT"},
			Columns: []string{"action", "actor", "filter", "reason", "events"}},
		{Role: RoleOperator, On: "webhook_operator_actions", Privileges: []string{"UPDATE"}, Columns: []string{"events"}},
		{Role: RoleOperator, On: "webhook_operator_actions_id_seq", Privileges: []string{"USAGE"}},
		// The links of an action to its events (both columns).
		{Role: RoleOperator, On: "webhook_operator_action_events", Privileges: []string{"INSERT"}},
		// The manifest, as the archiver keeps it (an archive run: prepare,
		// lock, commit, the orphan sweeps' delete), plus an expunge's
		// rewrite (ArchiveObjectMarkRewritten: size, sha256, rewritten_at)
		// and its sweep of orphans holding the event (prepare, lock,
		// delete).
		{Role: RoleOperator, On: "webhook_archive_objects", Privileges: []string{"DELETE"}},
		{Role: RoleOperator, On: "webhook_archive_objects", Privileges: []string{"INSERT"}, Columns: []string{"key", "provider"}},
		{Role: RoleOperator, On: "webhook_archive_objects", Privileges: []string{"UPDATE"},
			Columns: []string{"committed_at", "event_count", "size", "sha256", "rewritten_at", "first_id", "last_id", "last_received_at", "expired_at"}},
		// A re-ingest stores what now verifies with the receiver's own
		// statement (EventInsert: the receiver's columns, nothing more),
		// marks what still fails (QuarantineMarkFailed, whose FOR UPDATE
		// read needs an UPDATE privilege too) and deletes what it stored; a
		// purge and an expunge delete quarantined deliveries.
		{Role: RoleOperator, On: "webhook_events", Privileges: []string{"INSERT"},
			Columns: []string{"provider", "event_id", "event_type", "payload", "body", "body_sha256", "body_size", "metadata", "source_kind", "body_guard"}},
		{Role: RoleOperator, On: "webhook_events_id_seq", Privileges: []string{"USAGE"}},
		{Role: RoleOperator, On: "webhook_quarantine", Privileges: []string{"DELETE"}},
		{Role: RoleOperator, On: "webhook_quarantine", Privileges: []string{"UPDATE"}, Columns: []string{"tried_at", "last_cause", "last_error"}},
	}
	// Both operator roles read every core table whole: the operator pages
	// show events with their bodies (EventGetByID, EventList, the
	// archive's Body read), attempts, dead letters, operator actions and
	// their event links, rejections, payload mismatches and the archive's
	// manifest; the backlog (EventGetBacklogStats) and an event's claim
	// (EventGetByID) read the live claims; and the bloat estimate
	// (PGBloatEstimate) needs every column's statistics, which pg_stats
	// shows only to a role that may SELECT the column. No sequence: the
	// read role inserts nothing.
	for _, role := range []string{RoleOperatorRead, RoleOperator} {
		for _, table := range operatorTables {
			grants = append(grants, Grant{Role: role, On: table, Privileges: []string{"SELECT"}})
		}
	}
	return grants
}

// operatorTables are the core tables the operator roles read: every one.
var operatorTables = []string{
	"webhook_events", "webhook_attempts", "webhook_claims", "webhook_dead_letters", "webhook_operator_actions",
	"webhook_operator_action_events", "webhook_rejections", "webhook_payload_mismatches", "webhook_archive_objects",
	"webhook_pauses",
	"webhook_source_activity",
	"webhook_quarantine",
}
