package migrate

// The database roles of the three functions, one each, so that each
// connects with only the privileges its own statements use: code execution
// in the internet-facing receiver can then neither read stored bodies nor
// change or drop a table. Roles creates them and grants them; none of them
// owns anything, so none can create, alter or drop a table.
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
)

// FunctionRoles lists the three roles, in the order Roles sets them up.
func FunctionRoles() []string { return []string{RoleReceiver, RoleProcessor, RoleArchiver} }

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
}

// CoreGrants returns what each function's statements need on the core
// tables (shared/storage/queries), and nothing more. Where a function uses
// a few columns of a table that holds what it must not see (the receiver
// and webhook_events' bodies), the grant names the columns.
//
// A new query that needs more fails, as the function's role, in the tests
// of shared/dbschema (TestEachFunctionRunsAsItsRole) before it fails a
// deploy: add its privilege here.
func CoreGrants() []Grant {
	return []Grant{
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

		// The processor: the claims (EventClaimBatch, EventClaimSolo) read
		// and lock whole rows (a handler gets the body; FOR NO KEY UPDATE
		// needs an UPDATE privilege), EventFinish and the recovery of
		// interrupted claims write the processing columns only, and
		// EventGetBacklog counts.
		{Role: RoleProcessor, On: "webhook_events", Privileges: []string{"SELECT"}},
		{Role: RoleProcessor, On: "webhook_events", Privileges: []string{"UPDATE"},
			Columns: []string{"attempts", "failed_attempts", "solo", "last_attempt_at", "next_attempt_at", "last_error", "outcome", "processed_at", "dead_at"}},
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
		{Role: RoleProcessor, On: "webhook_dead_letters", Privileges: []string{"SELECT"}, Columns: []string{"id", "event_pk", "requeued_at", "dead_at"}},
		{Role: RoleProcessor, On: "webhook_dead_letters_id_seq", Privileges: []string{"USAGE"}},

		// The archiver: EventListArchiveCandidates and EventLockForArchive
		// read and lock processed rows (FOR NO KEY UPDATE needs an UPDATE
		// privilege), EventMarkArchived writes the archive columns and
		// clears the payload and body.
		{Role: RoleArchiver, On: "webhook_events", Privileges: []string{"SELECT"}},
		{Role: RoleArchiver, On: "webhook_events", Privileges: []string{"UPDATE"},
			Columns: []string{"archive_key", "archive_offset", "archive_length", "archived_at", "payload", "body"}},
		// Its bloat gauges read the planner's statistics, which PostgreSQL
		// shows only for tables the role may read: the attempt history and
		// the claims grow and churn with the inbox. Neither holds a body.
		{Role: RoleArchiver, On: "webhook_attempts", Privileges: []string{"SELECT"}},
		{Role: RoleArchiver, On: "webhook_claims", Privileges: []string{"SELECT"}},
		// The manifest is the archiver's own: prepare, lock, commit, and the
		// orphan sweep's delete.
		{Role: RoleArchiver, On: "webhook_archive_objects", Privileges: []string{"SELECT", "DELETE"}},
		{Role: RoleArchiver, On: "webhook_archive_objects", Privileges: []string{"INSERT"}, Columns: []string{"key", "provider"}},
		{Role: RoleArchiver, On: "webhook_archive_objects", Privileges: []string{"UPDATE"},
			Columns: []string{"committed_at", "event_count", "size", "sha256"}},
	}
}
