package inbox

import (
	"strings"
	"testing"
	"unicode/utf8"
)

func TestEscapeControls(t *testing.T) {
	t.Parallel()
	tests := []struct{ in, keep, want string }{
		{"plain text, é ü 日本", "", "plain text, é ü 日本"},
		{"\x1b[2J\x1b]52;c;aGk=\x07", "", `\u001b[2J\u001b]52;c;aGk=\u0007`},
		{"csi\u009b31m osc\u009d", "", `csi\u009b31m osc\u009d`},
		{"raw\x9b byte \xff", "", `raw\x9b byte \xff`},
		{"nul\x00 del\x7f cr\r", "", `nul\u0000 del\u007f cr\u000d`},
		{"line\nbreak\ttab", "\n\t", "line\nbreak\ttab"},
		{"line\nbreak", "", `line\u000abreak`},
		{"js\u2028sep \u202eevil", "", `js\u2028sep \u202eevil`},
		{`back\slash \u001b`, "", `back\slash \u001b`},
	}
	for _, tt := range tests {
		if got := EscapeControls(tt.in, tt.keep); got != tt.want {
			t.Errorf("EscapeControls(%q, %q) = %q, want %q", tt.in, tt.keep, got, tt.want)
		}
	}
}

// FuzzEscapeControls: whatever the input, the output is valid UTF-8 with
// no control character a terminal acts on (C0, DEL, C1), no line or
// paragraph separator and no bidirectional override, and escaping twice
// changes nothing more (the output holds nothing left to escape). Text
// with nothing to escape comes back unchanged.
func FuzzEscapeControls(f *testing.F) {
	for _, s := range []string{"", "plain", "\x1b[2J\x1b]52;c;aGk=\x07", "csi\u009b31m", "raw\x9b\xff", "a\u2028b\u202ec", "\xc2", "\xe2\x80"} {
		f.Add(s, "")
		f.Add(s, "\n\t")
	}
	f.Fuzz(func(t *testing.T, s, keep string) {
		out := EscapeControls(s, "")
		if !utf8.ValidString(out) {
			t.Fatalf("EscapeControls(%q) = %q: not UTF-8", s, out)
		}
		for _, r := range out {
			if r < 0x20 || (r >= 0x7f && r <= 0x9f) || r == 0x2028 || r == 0x2029 || (r >= 0x202a && r <= 0x202e) || (r >= 0x2066 && r <= 0x2069) {
				t.Fatalf("EscapeControls(%q) = %q keeps %U", s, out, r)
			}
		}
		if again := EscapeControls(out, ""); again != out {
			t.Fatalf("escaping twice changed %q to %q", out, again)
		}
		clean := true
		for _, r := range s {
			if r == utf8.RuneError || r < 0x20 || (r >= 0x7f && r <= 0x9f) || r == 0x2028 || r == 0x2029 || (r >= 0x202a && r <= 0x202e) || (r >= 0x2066 && r <= 0x2069) {
				clean = false
			}
		}
		if clean && out != s {
			t.Fatalf("clean text %q changed to %q", s, out)
		}
		// Kept controls pass through, and nothing else does.
		for _, r := range EscapeControls(s, keep) {
			if (r < 0x20 || (r >= 0x7f && r <= 0x9f)) && !strings.ContainsRune(keep, r) {
				t.Fatalf("EscapeControls(%q, keep %q) keeps %U", s, keep, r)
			}
		}
	})
}

func TestValidHeaderName(t *testing.T) {
	for s, want := range map[string]bool{
		"X-Hub-Signature-256": true, "x_sig.v1": true, "!#$%&'*+-.^_`|~": true,
		"": false, "X Sig": false, "X-Sig:": false, "X-Sig\r\n": false, "Ünicode": false,
	} {
		if got := ValidHeaderName(s); got != want {
			t.Errorf("ValidHeaderName(%q) = %v, want %v", s, got, want)
		}
	}
}
