package main

import (
	"encoding/json"
	"strings"
	"testing"
)

// An answer, JSON or not, is printed without a raw control character,
// and a JSON one stays JSON.
func TestAnswerIsEscaped(t *testing.T) {
	t.Parallel()
	for _, in := range []string{"{\"status\":\"x\u009b31m\u2028\"}", "<html>\x1b]52;c;aGk=\x07</html>"} {
		out := answerOrString([]byte(in))
		if strings.ContainsAny(string(out), "\x1b\x07\u009b\u2028") || !json.Valid(out) {
			t.Errorf("%q printed as %q", in, out)
		}
	}
	if got := safeAnswer([]byte("401 \x1b[2J")); got != `401 \u001b[2J` {
		t.Errorf("safeAnswer = %q", got)
	}
}
