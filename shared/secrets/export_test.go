package secrets

import (
	"time"

	"github.com/webhook-inbox/webhook-inbox/shared/storage"
)

// SetClock makes the secret credentials creds (as Environment returns
// them) read the time from now.
func SetClock(creds storage.Credentials, now func() time.Time) {
	c := creds.(*secretCredentials)
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = now
}
