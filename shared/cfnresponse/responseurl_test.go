package cfnresponse

import "testing"

// CloudFormation's response URLs, in the forms S3 serves them, are
// accepted; any other host, plain HTTP, a port or credentials are not; the
// loopback only with allowLoopback.
func TestCheckResponseURL(t *testing.T) {
	t.Parallel()
	for u, want := range map[string]bool{
		"https://cloudformation-custom-resource-response-useast1.s3.amazonaws.com/arn%3Aaws/x?X-Amz-Signature=1":           true,
		"https://cloudformation-custom-resource-response-euwest1.s3.eu-west-1.amazonaws.com/arn%3Aaws/x?X-Amz-Signature=1": true,
		"https://cloudformation-custom-resource-response-euwest1.s3-eu-west-1.amazonaws.com/x":                             true,
		"https://cloudformation-custom-resource-response-usgovwest1.s3.us-gov-west-1.amazonaws.com/x":                      true,
		"https://cloudformation-custom-resource-response-cnnorth1.s3.cn-north-1.amazonaws.com.cn/x":                        true,
		"https://s3.eu-west-1.amazonaws.com/cloudformation-custom-resource-response-euwest1/x":                             true,
		"https://CLOUDFORMATION-custom-resource-response-euwest1.S3.amazonaws.com/x":                                       true,
		"http://cloudformation-custom-resource-response-euwest1.s3.amazonaws.com/x":                                        false,
		"https://cloudformation-custom-resource-response-euwest1.s3.amazonaws.com:8443/x":                                  false,
		"https://u:p@cloudformation-custom-resource-response-euwest1.s3.amazonaws.com/x":                                   false,
		"https://s3.eu-west-1.amazonaws.com/attacker/x":                                                                    false,
		"https://attacker.s3.eu-west-1.amazonaws.com/x":                                                                    false,
		"https://abcs3defgh.execute-api.eu-west-1.amazonaws.com/x":                                                         false,
		"https://cloudformation-custom-resource-response-euwest1.s3.amazonaws.com.attacker.example/x":                      false,
		"https://attacker.example/cloudformation-custom-resource-response-euwest1/x":                                       false,
		"http://127.0.0.1:8080/x": false,
		"https://localhost/x":     false,
		"/relative":               false,
		"":                        false,
	} {
		if err := CheckResponseURL(u, false); (err == nil) != want {
			t.Errorf("%q: %v, want accepted %v", u, err, want)
		}
	}
	for u, want := range map[string]bool{
		"http://127.0.0.1:8080/x": true, "https://[::1]:8443/x": true, "http://localhost:1/x": true,
		"http://10.0.0.1/x": false, "ftp://127.0.0.1/x": false,
	} {
		if err := CheckResponseURL(u, true); (err == nil) != want {
			t.Errorf("loopback allowed, %q: %v, want accepted %v", u, err, want)
		}
	}
}
