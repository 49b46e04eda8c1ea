package main

import (
	"io"
	"unicode/utf8"

	"github.com/spf13/cobra"

	"github.com/webhook-inbox/webhook-inbox/shared/inbox"
)

// safeWriter is every command's standard output and standard error: it
// writes through inbox.EscapeControls, so no string from a request or the
// database (a source name, an event id or type, an error text, a body)
// reaches the terminal as a control sequence, in a table, in the text of
// a body or in --json (encoding/json leaves C1 controls raw; their escape
// \u00NN is JSON too). Newlines and tabs, which the tables are made of,
// pass. The few sequences webhookctl writes itself (the clear screen of
// stats --watch, the progress bars) go to raw(w).
type safeWriter struct {
	w io.Writer
	// pending holds the start of a UTF-8 sequence cut by the end of a
	// Write, completed by the next one.
	pending []byte
}

// useSafeOutput routes cmd's output and errors through safeWriters.
func useSafeOutput(cmd *cobra.Command) {
	if _, ok := cmd.OutOrStdout().(*safeWriter); !ok {
		cmd.SetOut(&safeWriter{w: cmd.OutOrStdout()})
	}
	if _, ok := cmd.ErrOrStderr().(*safeWriter); !ok {
		cmd.SetErr(&safeWriter{w: cmd.ErrOrStderr()})
	}
}

// flushSafeOutput writes what cmd's safeWriters still hold.
func flushSafeOutput(cmd *cobra.Command) {
	for _, w := range []io.Writer{cmd.OutOrStdout(), cmd.ErrOrStderr()} {
		if s, ok := w.(*safeWriter); ok {
			_ = s.Flush()
		}
	}
}

func (s *safeWriter) Write(p []byte) (int, error) {
	n := len(p)
	if len(s.pending) > 0 {
		p = append(s.pending, p...)
		s.pending = nil
	}
	// Keep an incomplete sequence at the end for the next Write.
	for i := 1; i <= 3 && i <= len(p); i++ {
		c := p[len(p)-i]
		if c < 0x80 {
			break
		}
		if utf8.RuneStart(c) {
			if !utf8.FullRune(p[len(p)-i:]) {
				s.pending = append([]byte(nil), p[len(p)-i:]...)
				p = p[:len(p)-i]
			}
			break
		}
	}
	if _, err := io.WriteString(s.w, inbox.EscapeControls(string(p), "\n\t")); err != nil {
		return 0, err
	}
	return n, nil
}

// Flush writes a sequence left incomplete (escaped: it is not UTF-8).
func (s *safeWriter) Flush() error {
	if len(s.pending) == 0 {
		return nil
	}
	p := s.pending
	s.pending = nil
	_, err := io.WriteString(s.w, inbox.EscapeControls(string(p), "\n\t"))
	return err
}

// raw is the writer under w's safeWriter, for webhookctl's own control
// sequences and for telling whether the output is a terminal.
func raw(w io.Writer) io.Writer {
	if s, ok := w.(*safeWriter); ok {
		return s.w
	}
	return w
}
