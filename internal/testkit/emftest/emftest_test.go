package emftest_test

import (
	"testing"

	"github.com/webhook-inbox/webhook-inbox/internal/testkit/emftest"
)

func TestValidateRefuses(t *testing.T) {
	t.Parallel()
	bad := map[string]string{
		"no _aws":             `{"Rejected":1}`,
		"missing dimension":   `{"_aws":{"Timestamp":1,"CloudWatchMetrics":[{"Namespace":"N","Dimensions":[["source"]],"Metrics":[{"Name":"Rejected"}]}]},"Rejected":1}`,
		"metric not a number": `{"_aws":{"Timestamp":1,"CloudWatchMetrics":[{"Namespace":"N","Dimensions":[[]],"Metrics":[{"Name":"Rejected"}]}]},"Rejected":"1"}`,
		"no namespace":        `{"_aws":{"Timestamp":1,"CloudWatchMetrics":[{"Dimensions":[[]],"Metrics":[{"Name":"R"}]}]},"R":1}`,
		"bad unit":            `{"_aws":{"Timestamp":1,"CloudWatchMetrics":[{"Namespace":"N","Dimensions":[[]],"Metrics":[{"Name":"R","Unit":"Parsecs"}]}]},"R":1}`,
		"timestamp not int":   `{"_aws":{"Timestamp":"now","CloudWatchMetrics":[{"Namespace":"N","Dimensions":[[]],"Metrics":[{"Name":"R"}]}]},"R":1}`,
	}
	for name, line := range bad {
		if err := emftest.Validate([]byte(line)); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}
