package dbsqlc

// Written by hand beside the generated files (sqlc leaves other files of
// its output folder alone): the text of the receiver's one statement,
// exported so that the benchmark runs the very same SQL under pgbench.
const EventInsertSQL = eventInsert

// PayloadMismatchCountBySourceSQL is the statistics' statement, exported
// so that a test can show its plan uses its index.
const PayloadMismatchCountBySourceSQL = payloadMismatchCountBySource
