package storage

// InChunks returns o changing n rows per statement, so that a test
// replays, requeues, resolves or discards in several chunks a handful of
// rows.
func InChunks(o BulkOptions, n int) BulkOptions {
	o.chunk = n
	return o
}
