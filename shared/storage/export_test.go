package storage

// InChunks returns o resetting n events per UPDATE, so that a test replays
// in several chunks a handful of events.
func InChunks(o ReplayOptions, n int) ReplayOptions {
	o.chunk = n
	return o
}

// BulkInChunks returns o changing n rows per statement.
func BulkInChunks(o BulkOptions, n int) BulkOptions {
	o.chunk = n
	return o
}
