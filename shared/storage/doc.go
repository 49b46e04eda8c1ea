// Package storage is the Postgres adapter and the one home for SQL.
//
// Queries live in queries/*.sql, one file per table (webhook_events.sql,
// webhook_dead_letters.sql, ...) plus pg_misc.sql for the server itself,
// each named <Table><Verb> after River's convention (EventInsert,
// DeadLetterRequeue, ArchiveObjectCommit). sqlc generates internal/dbsqlc
// from them against the schema the migrations in migrate/ build; this
// package turns the generated rows into the domain's types (inbox.Event and
// its siblings) and adds what SQL cannot say (retries, checks of affected
// rows, error wrapping). The one query sqlc cannot express well, EventList
// with its state filter, is written by hand in event_list.go.
//
// Pool and transaction are interchangeable: *Store and *Tx both implement
// Executor, and Store.Begin returns a *Tx whose commit or rollback the
// caller owns. Business code calls these methods and never builds SQL
// from input.
package storage
