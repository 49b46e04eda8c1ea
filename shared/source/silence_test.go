package source

import (
	"strings"
	"testing"
	"time"
)

const silenceSecret = "s3cr3t-github-0123456789abcdefghijklmnopqrstuvwxyz"

func TestSilentAfter(t *testing.T) {
	t.Parallel()
	set := mustParse(t, `{"sources": {
	  "quiet":  {"kind": "github", "secrets": ["`+silenceSecret+`"], "silent_after": "6h"},
	  "mixed":  {"kind": "github", "secrets": ["`+silenceSecret+`"], "silent_after": "1h30m", "endpoint_token": "`+testToken+`"},
	  "never":  {"kind": "github", "secrets": ["`+silenceSecret+`"]},
	  "bounds": {"kind": "stripe", "secrets": ["whsec_0123456789abcdefghijklmnopqrstuvwx"], "silent_after": "720h"}
	}}`)
	for name, want := range map[string]time.Duration{"quiet": 6 * time.Hour, "mixed": 90 * time.Minute, "never": 0, "bounds": MaxSilentAfter} {
		src, ok := set.Lookup(name)
		if !ok {
			t.Fatalf("%s missing", name)
		}
		if src.SilentAfter != want {
			t.Errorf("%s: SilentAfter %s, want %s", name, src.SilentAfter, want)
		}
	}
	if src, _ := set.Lookup("mixed"); !src.HasEndpointToken() {
		t.Error("mixed: the endpoint token beside silent_after was lost")
	}
}

func TestSilentAfterRefused(t *testing.T) {
	t.Parallel()
	tests := []struct{ value, want string }{
		{`"6 hours"`, `must be a duration such as "6h"`},
		{`"1d"`, `must be a duration such as "6h"`},
		{`""`, `must be a duration such as "6h"`},
		{`"` + silenceSecret + `"`, `must be a duration such as "6h"`},
		{`21600`, `must be a duration string`},
		{`null`, `must be a duration`},
		{`"14m"`, `must be from 15m to 720h (30 days), got 14m0s`},
		{`"-6h"`, `must be from 15m to 720h`},
		{`"721h"`, `must be from 15m to 720h`},
	}
	for _, tt := range tests {
		doc := `{"sources": {"gh": {"kind": "github", "secrets": ["` + silenceSecret + `"], "silent_after": ` + tt.value + `}}}`
		_, err := Parse([]byte(doc))
		if err == nil {
			t.Errorf("silent_after %s accepted", tt.value)
			continue
		}
		msg := err.Error()
		if !strings.Contains(msg, `source "gh": field "silent_after"`) || !strings.Contains(msg, tt.want) {
			t.Errorf("silent_after %s: %q, want the source, the field and %q", tt.value, msg, tt.want)
		}
		if strings.Contains(msg, silenceSecret) || strings.Contains(msg, "s3cr3t") {
			t.Errorf("silent_after %s: the error carries a secret: %q", tt.value, msg)
		}
	}
}
