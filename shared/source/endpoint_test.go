package source

import (
	"strings"
	"testing"
)

const testToken = "tok_0123456789abcdefghijklmnopqrstuv"

func TestEndpointOptions(t *testing.T) {
	t.Parallel()
	set := mustParse(t, `{"sources": {
	  "plain":  {"kind": "github", "secrets": ["s3cr3t-github-0123456789abcdefghijklmnopqrstuvwxyz"]},
	  "both":   {"kind": "github", "secrets": ["s3cr3t-github-0123456789abcdefghijklmnopqrstuvwxyz"], "endpoint_token": "`+testToken+`"},
	  "hidden": {"kind": "github", "secrets": ["s3cr3t-github-0123456789abcdefghijklmnopqrstuvwxyz"], "endpoint_token": "`+testToken+`", "untokened_path": false}
	}}`)
	tests := []struct {
		name             string
		path             string
		untokened        bool
		token            string
		tokenOK, wrongOK bool
	}{
		{"plain", "/webhooks/plain", true, "", false, false},
		{"both", "/webhooks/both/" + testToken, true, testToken, true, false},
		{"hidden", "/webhooks/hidden/" + testToken, false, testToken, true, false},
	}
	for _, tt := range tests {
		src, ok := set.Lookup(tt.name)
		if !ok {
			t.Fatalf("%s missing", tt.name)
		}
		if src.Path() != tt.path || src.HasEndpointToken() != (tt.token != "") || src.UntokenedPath() != tt.untokened {
			t.Errorf("%s: path %q token %v untokened %v", tt.name, src.Path(), src.HasEndpointToken(), src.UntokenedPath())
		}
		if got := src.AllowsEndpoint("", false); got != tt.untokened {
			t.Errorf("%s: untokened path allowed = %v", tt.name, got)
		}
		if got := src.AllowsEndpoint(testToken, true); got != tt.tokenOK {
			t.Errorf("%s: right token allowed = %v", tt.name, got)
		}
		for _, wrong := range []string{"", testToken[:len(testToken)-1], testToken + "x", strings.ToUpper(testToken)} {
			if src.AllowsEndpoint(wrong, true) {
				t.Errorf("%s: token %q allowed", tt.name, wrong)
			}
		}
	}
}

func TestEndpointOptionsRefused(t *testing.T) {
	t.Parallel()
	tests := []struct{ opts, want string }{
		{`"endpoint_token": "short"`, `field "endpoint_token"`},
		{`"endpoint_token": "` + strings.Repeat("a", 31) + `"`, `field "endpoint_token"`},
		{`"endpoint_token": "` + strings.Repeat("a", 31) + `/"`, `field "endpoint_token"`},
		{`"endpoint_token": 12`, `field "endpoint_token"`},
		{`"untokened_path": false`, `field "untokened_path"`},
		{`"untokened_path": "no"`, `field "untokened_path"`},
		{`"endpoint_tokn": "` + testToken + `"`, `unknown field`},
	}
	for _, tt := range tests {
		_, err := Parse([]byte(`{"sources": {"gh": {"kind": "github", "secrets": ["s3cr3t-github-0123456789abcdefghijklmnopqrstuvwxyz"], ` + tt.opts + `}}}`))
		if err == nil || !strings.Contains(err.Error(), tt.want) || !strings.Contains(err.Error(), `"gh"`) {
			t.Errorf("%s: err = %v, want one naming the source and %s", tt.opts, err, tt.want)
		}
		if err != nil && strings.Contains(err.Error(), "aaaaaaaa") {
			t.Errorf("%s: the error shows the token: %v", tt.opts, err)
		}
	}
}
