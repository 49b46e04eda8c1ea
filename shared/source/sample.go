package source

import (
	"crypto/rand"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"time"
)

// Sample is a realistic event of a source's kind, before signing: what
// `make dev` prints as a curl command, and what tests, benchmarks and the
// CLI send. Each kind makes its own (its sender's body shape, id format
// and extra headers); sampleMaker is part of the kindVerifier contract, so a
// kind without a sample does not compile and can never be given another
// kind's shape.
type Sample struct {
	// EventID and EventType are the identity the source's verifier reads
	// from this sample once it is signed. EventType is "" when the source
	// is configured to read no type (standard with type_field "", hmac
	// without event_type).
	EventID, EventType string
	Body               []byte
	// Header holds what the sender sends beside the headers Sign sets:
	// unsigned metadata such as GitHub's X-GitHub-Hook-ID or Shopify's
	// X-Shopify-Shop-Domain. Never nil.
	Header http.Header
}

// sampleMaker makes a kind's sample events.
type sampleMaker interface {
	// makeSample returns a new sample with random ids, so that every sample
	// is accepted as a new event; now dates it.
	makeSample(now time.Time) (Sample, error)
}

// Sample returns a new sample event of src's kind, with random ids and
// dated now, for src's configuration (where an hmac source reads its id,
// which field a standard source reads its type from). Sign it with
// SignEvent(s.Body, s.EventID, s.EventType, now) and add s.Header.
func (s *Source) Sample(now time.Time) (Sample, error) {
	sm, ok := s.Verifier.(sampleMaker)
	if !ok {
		return Sample{}, errors.New("source " + s.Name + ": kind " + s.Kind + " has no sample event")
	}
	sample, err := sm.makeSample(now)
	if err != nil {
		return Sample{}, fmt.Errorf("source %s: sample: %w", s.Name, err)
	}
	return sample, nil
}

// randomIDs returns the randomness of one sample: a hex suffix for ids
// such as "evt_dev_<suffix>", and a positive number (from the same bytes)
// that JSON numbers hold exactly, for senders whose ids are numbers.
func randomIDs() (suffix string, number uint64) {
	var b [8]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails (Go 1.24+)
	return hex.EncodeToString(b[:]), binary.BigEndian.Uint64(b[:]) >> 12
}

// newUUID returns a random (version 4) UUID, the shape of GitHub's
// delivery ids, Square's event ids and Shopify's webhook ids.
func newUUID() string {
	var u [16]byte
	_, _ = rand.Read(u[:])
	u[6] = u[6]&0x0f | 0x40
	u[8] = u[8]&0x3f | 0x80
	return fmt.Sprintf("%x-%x-%x-%x-%x", u[0:4], u[4:6], u[6:8], u[8:10], u[10:16])
}

// setPath sets the value at a path of keys into nested objects in doc,
// creating (or replacing) what is in the way; an empty path sets nothing.
func setPath(doc map[string]any, keys []string, value string) {
	if len(keys) == 0 {
		return
	}
	for _, k := range keys[:len(keys)-1] {
		next, ok := doc[k].(map[string]any)
		if !ok {
			next = map[string]any{}
			doc[k] = next
		}
		doc = next
	}
	doc[keys[len(keys)-1]] = value
}
