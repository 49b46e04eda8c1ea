package processor

import "context"

// RecoverClaims runs the recovery of expired claims alone, as a drain
// does first, for tests that kill processors in between.
func (p *Processor) RecoverClaims(ctx context.Context) (Stats, error) {
	var st Stats
	err := p.recoverClaims(ctx, &st)
	return st, err
}

// PrivilegeError is privilegeError, for its table test.
var PrivilegeError = privilegeError
