package inbox

import (
	"strconv"
	"strings"
	"unicode/utf8"
)

// EscapeControls returns s with every control character written as an
// escape, so that text from a request or the database can be stored,
// logged and printed without driving a terminal: C0 controls (ESC, CR,
// BEL, NUL...), DEL and the C1 controls U+0080 to U+009F (CSI, OSC...)
// become \u00NN (an escape JSON reads too, so escaped JSON stays JSON), as
// do U+2028 and U+2029 (line breaks to JavaScript) and the bidirectional
// overrides U+202A to U+202E and U+2066 to U+2069 (which reorder what is
// shown); a byte that is not UTF-8 becomes \xNN. Backslashes are left alone (a JSON body stays
// readable), so an escape is not told from the same text sent. keep lists the controls left as they are (for
// example "\n\t" for a body printed as text). Text without any of these
// is returned as is.
func EscapeControls(s, keep string) string {
	i := 0
	for i < len(s) {
		r, n := utf8.DecodeRuneInString(s[i:])
		if escaped(r, n) && !strings.ContainsRune(keep, r) {
			break
		}
		i += n
	}
	if i == len(s) {
		return s
	}
	var b strings.Builder
	b.Grow(len(s) + 16)
	b.WriteString(s[:i])
	for i < len(s) {
		r, n := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && n == 1:
			b.WriteString(`\x`)
			b.WriteString(hex2(uint64(s[i])))
		case !escaped(r, n) || strings.ContainsRune(keep, r):
			b.WriteString(s[i : i+n])
		default:
			b.WriteString(`\u`)
			s4 := strconv.FormatUint(uint64(r), 16)
			b.WriteString(strings.Repeat("0", 4-len(s4)) + s4)
		}
		i += n
	}
	return b.String()
}

// escaped reports whether the rune r, n bytes long, is escaped.
func escaped(r rune, n int) bool {
	switch {
	case r == utf8.RuneError && n == 1:
		return true
	case r < 0x20, r >= 0x7f && r <= 0x9f:
		return true
	case r == 0x2028, r == 0x2029, r >= 0x202a && r <= 0x202e, r >= 0x2066 && r <= 0x2069:
		return true
	}
	return false
}

func hex2(v uint64) string {
	h := strconv.FormatUint(v, 16)
	if len(h) < 2 {
		h = "0" + h
	}
	return h
}

// ValidHeaderName reports whether s is a non-empty RFC 9110 token, the
// syntax of an HTTP header's name: a source's configured signature
// header (package source) and a response's headers (package lambdahttp)
// are checked with it.
func ValidHeaderName(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9':
		case strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0:
		default:
			return false
		}
	}
	return true
}
