package storage

// InChunks returns o resetting n events per UPDATE, so that a test replays
// in several chunks a handful of events.
func InChunks(o ReplayOptions, n int) ReplayOptions {
	o.chunk = n
	return o
}
