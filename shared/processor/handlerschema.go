package processor

import "io/fs"

// HandlerSchema describes a handler package's own tables for the migration
// function, which alone changes the schema: it applies Migrations with
// their own goose version table, and grants the processor's database role
// Grants on them, and nothing else. The processor never runs DDL; its role
// could not.
//
// A handler package declares one, beside its Register:
//
//	//go:embed migrations/*.sql
//	var migrations embed.FS
//
//	var Schema = processor.HandlerSchema{
//		Name: "stripedunning", Migrations: migrations, Dir: "migrations",
//		VersionTable: "stripedunning_goose_db_version",
//		Grants: map[string][]string{"stripe_dunning": {"SELECT", "INSERT", "UPDATE"}},
//	}
//
// and shared/handlers lists it in handlers.Schemas.
type HandlerSchema struct {
	// Name is the package's, for errors and the migration's report.
	Name string
	// Migrations holds the goose SQL files, in folder Dir.
	Migrations fs.FS
	Dir        string
	// VersionTable is goose's version table for these migrations, apart
	// from the core schema's so that their numbering is the package's own.
	VersionTable string
	// Grants are the privileges the package's statements need, by table:
	// SELECT, INSERT, UPDATE, DELETE. The sequences a table owns (its
	// identity and serial columns) get USAGE with its INSERT, without a
	// word here (migrate.Grant.Sequences), and a foreign key's check needs
	// nothing on the table it references. A statement that needs more is
	// refused (SQLSTATE 42501) in the processor, under make dev (which
	// runs the processor as its role), and in a handler's test run as the
	// processor's role; the attempt's error then names the table and the
	// entry to add (cause handler_privilege).
	Grants map[string][]string
}
