package relay

import (
	"encoding/json"
	"testing"
)

// FuzzParse: no event, however malformed, makes the relay panic: parse
// returns one known shape or an error, and reading a marker's key returns
// a target and time or an error.
func FuzzParse(f *testing.F) {
	for _, seed := range []string{
		`{"Records":[{"eventSource":"aws:s3","eventName":"ObjectCreated:Put","s3":{"bucket":{"name":"b"},"object":{"key":"wake%2Farm%2Fprocessor%2F2026-12-03T10%3A15%3A00Z"}}}]}`,
		`{"source":"aws.s3","detail-type":"Object Created","detail":{"bucket":{"name":"b"},"object":{"key":"wake/arm/archiver/2026-12-03T10:15:00Z"}}}`,
		`{"source":"aws.secretsmanager","detail-type":"Secret Label Updated","resources":["arn:aws:secretsmanager:us-east-1:1:secret:s-a1b2c3"],"detail":{"name":"s","labelUpdated":"AWSCURRENT","versionId":"v"}}`,
		`{"RequestType":"Create","ResponseURL":"http://127.0.0.1/x","ResourceType":"Custom::SourcesCopy"}`,
		`{"Records":[{"eventSource":"aws:s3","s3":null}]}`, `{"Records":null}`, `{"source":1,"detail-type":[]}`, `null`, `[]`, `"x"`,
	} {
		f.Add([]byte(seed))
	}
	targets := map[string]string{TargetProcessor: "arn:p", TargetArchiver: "arn:a"}
	f.Fuzz(func(t *testing.T, raw []byte) {
		ev, err := parse(json.RawMessage(raw))
		if err != nil {
			return
		}
		kinds := 0
		if ev.objects != nil {
			kinds++
		}
		if ev.secret != nil {
			kinds++
		}
		if ev.request != nil {
			kinds++
		}
		if kinds != 1 {
			t.Fatalf("%q parsed as %d kinds", raw, kinds)
		}
		for _, o := range ev.objects {
			target, at, ok, err := parseArmKey(o.key, targets)
			if err == nil && ok && (targets[target] == "" || at.IsZero() || at.Second() != 0) {
				t.Fatalf("%q read as %q %v", o.key, target, at)
			}
		}
	})
}
