package relay_test

import (
	"strings"
	"testing"

	"github.com/webhook-inbox/webhook-inbox/shared/relay"
)

// TestConfigFromEnv: the defaults, and every problem named at once.
func TestConfigFromEnv(t *testing.T) {
	t.Parallel()
	env := map[string]string{
		"RELAY_CONTROL_BUCKET": "inbox-control", "RELAY_SOURCES_SECRET_ARN": "arn:aws:secretsmanager:us-east-1:123456789012:secret:inbox-sources",
		"RELAY_SCHEDULE_GROUP": "inbox-wake", "RELAY_SCHEDULER_ROLE_ARN": roleARN,
		"RELAY_PROCESSOR_ARN": processorARN, "RELAY_ARCHIVER_ARN": archiverARN, "AWS_REGION": "eu-west-1",
	}
	c, err := relay.ConfigFromEnv(func(k string) string { return env[k] })
	if err != nil {
		t.Fatal(err)
	}
	if c.SourcesKey != "config/sources.json" {
		t.Errorf("SourcesKey = %q, want config/sources.json", c.SourcesKey)
	}
	if c.Targets["processor"] != processorARN {
		t.Errorf("Targets[processor] = %q, want %q", c.Targets["processor"], processorARN)
	}
	if c.Targets["archiver"] != archiverARN {
		t.Errorf("Targets[archiver] = %q, want %q", c.Targets["archiver"], archiverARN)
	}
	if c.ControlBucket != "inbox-control" {
		t.Errorf("ControlBucket = %q, want inbox-control", c.ControlBucket)
	}

	_, err = relay.ConfigFromEnv(func(k string) string {
		return map[string]string{
			"RELAY_SOURCES_KEY": "sources.json", "RELAY_SCHEDULE_GROUP": "inbox wake", "RELAY_PROCESSOR_ARN": "inbox-ProcessorFunction",
		}[k]
	})
	for _, want := range []string{
		"RELAY_CONTROL_BUCKET is not set", "RELAY_SOURCES_SECRET_ARN is not set", "RELAY_SCHEDULER_ROLE_ARN is not set",
		"RELAY_ARCHIVER_ARN is not set", `RELAY_PROCESSOR_ARN must be an ARN (arn:...), got "inbox-ProcessorFunction"`,
		`RELAY_SOURCES_KEY must be a key under config/`, `RELAY_SCHEDULE_GROUP must be 1 to 64`,
	} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("error does not say %q:\n%v", want, err)
		}
	}
}
