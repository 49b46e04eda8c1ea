package operations

// SetSearchBudget makes a search by content stop after rows events, read
// chunk at a time, so that a test sees a partial page without loading the
// default budget's tens of thousands of events. Its time budget becomes
// an hour: the test's pages depend on rows alone.
func SetSearchBudget(s *Service, rows, chunk int) {
	s.budget = budget{rows: rows, chunk: chunk, time: 3600e9}
}
