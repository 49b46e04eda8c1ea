package inbox

import "testing"

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
