// Package storage is the Postgres adapter and the one home for SQL: the
// embedded, versioned migrations and every query the functions run, named
// <Table><Verb> after River's convention. Business code calls these methods
// and never builds SQL from input.
package storage
