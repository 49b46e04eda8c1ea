package main

import (
	"bytes"
	"strconv"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/webhook-inbox/webhook-inbox/internal/testkit/factory"
	"github.com/webhook-inbox/webhook-inbox/shared/inbox"
)

// hostile is text a request or a database row may hold: ESC sequences (a
// screen clear, an OSC 52 clipboard write), C1 controls (CSI, OSC, as
// UTF-8 and as a raw byte), BEL, CR, DEL, U+2028 and a bidi override.
const hostile = "x\x1b[2J\x1b]52;c;aGk=\x07\u009b31m\u009d0;t\x07\r\x7f\u2028\u202ey" // Postgres text holds no invalid UTF-8

// rawControl returns the first raw control character in out that is not
// a newline or tab, or "".
func rawControl(out string) string {
	for i := 0; i < len(out); {
		r, n := utf8.DecodeRuneInString(out[i:])
		switch {
		case r == utf8.RuneError && n == 1:
			return strconv.Quote(out[i : i+1])
		case r == '\n' || r == '\t':
		case r < 0x20, r >= 0x7f && r <= 0x9f, r == 0x2028, r == 0x2029, r >= 0x202a && r <= 0x202e:
			return strconv.QuoteToASCII(string(r))
		}
		i += n
	}
	return ""
}

// TestNoRawControlInAnyOutput: rows holding hostile text in every field a
// sender or handler fills are printed by stats, one frame of stats
// --watch, events list and show, dead-letters list and actions, as tables
// and as JSON, without one raw control character.
func TestNoRawControlInAnyOutput(t *testing.T) {
	t.Parallel()
	f := newOpsFixture(t)
	factory.Rejection(f.ctx, t, f.store, &factory.RejectionOpts{Source: hostile, Cause: inbox.Cause("cause" + hostile), Message: hostile})
	ev := factory.Event(f.ctx, t, f.store, &factory.EventOpts{
		Source: "stripe", EventID: "evt" + hostile, Type: "type" + hostile,
		Body: []byte(`{"note":"` + hostile + `"}`), State: inbox.StateDead, LastError: "boom" + hostile,
	})
	f.runOK("replay", "--all", "--yes", "--actor", "eve"+hostile, "--reason", "why"+hostile)
	id := strconv.FormatInt(ev.ID, 10)
	for _, args := range [][]string{
		{"stats"}, {"stats", "--watch", "--watch-count", "1"},
		{"events", "list"}, {"events", "show", id},
		{"dead-letters", "list"}, {"actions"},
	} {
		for _, asJSON := range []bool{false, true} {
			a := args
			if asJSON {
				a = append(append([]string(nil), args...), "--json")
			}
			out, errOut, err := f.run(a...)
			if err != nil {
				t.Fatalf("webhookctl %s: %v\n%s", strings.Join(a, " "), err, errOut)
			}
			if c := rawControl(out + errOut); c != "" {
				t.Errorf("webhookctl %s prints a raw %s:\n%q", strings.Join(a, " "), c, out)
			}
			if !strings.Contains(out, `\u001b`) && !strings.Contains(args[0], "actions") {
				t.Errorf("webhookctl %s does not show the escaped text:\n%s", strings.Join(a, " "), out)
			}
		}
	}
}

// TestSafeWriterKeepsSplitCharacters: a character cut in two by the end
// of a Write is written whole, and an incomplete one at the end is
// escaped by Flush.
func TestSafeWriterKeepsSplitCharacters(t *testing.T) {
	t.Parallel()
	var b bytes.Buffer
	w := &safeWriter{w: &b}
	s := "é\u009b日"
	for i := range len(s) {
		_, _ = w.Write([]byte{s[i]})
	}
	_, _ = w.Write([]byte("\xe6\x97"))
	_ = w.Flush()
	if got, want := b.String(), `é\u009b日\xe6\x97`; got != want {
		t.Fatalf("got %q, want %q", got, want)
	}
}
