package archive

import (
	"bytes"
	"compress/gzip"
	"errors"
	"io"
	"os/exec"
	"testing"
	"time"

	"github.com/webhook-inbox/webhook-inbox/shared/inbox"
)

func event(id int64, body []byte) *inbox.Event {
	sum := sha256Sum(body)
	t := time.Date(2026, 1, 2, 3, 4, 5, 6000, time.UTC)
	return &inbox.Event{ID: id, Source: "stripe", EventID: "evt_" + string(rune('a'+id)), Type: "t",
		Body: body, BodySHA256: sum, BodySize: len(body), CreatedAt: t, ProcessedAt: new(t.Add(time.Second))}
}

// gunzipAll reads a whole object as zcat does: every member in turn.
func gunzipAll(t *testing.T, obj []byte) []byte {
	t.Helper()
	zr, err := gzip.NewReader(bytes.NewReader(obj))
	if err != nil {
		t.Fatal(err)
	}
	out, err := io.ReadAll(zr)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// zcat runs the real zcat on obj when the machine has it.
func zcat(t *testing.T, obj []byte) []byte {
	t.Helper()
	if _, err := exec.LookPath("zcat"); err != nil {
		t.Log("no zcat on this machine; using compress/gzip")
		return gunzipAll(t, obj)
	}
	cmd := exec.Command("zcat")
	cmd.Stdin = bytes.NewReader(obj)
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("zcat: %v", err)
	}
	return out
}

func TestObjectMembersAndLines(t *testing.T) {
	t.Parallel()
	bodies := [][]byte{
		[]byte(`{"id":"evt_1","type":"invoice.paid"}`),
		[]byte("not json at all\r\n<b>&amp;</b>"),
		{0xff, 0xfe, 'x', 0},         // invalid UTF-8: base64
		{},                           // empty body
		[]byte("nul\x00 and \u2028"), // valid UTF-8 with a NUL and a line separator
	}
	b := newObjectBuilder()
	for i, body := range bodies {
		if err := b.add(event(int64(i+1), body)); err != nil {
			t.Fatal(err)
		}
	}
	obj := b.buf.Bytes()
	if len(b.locs) != len(bodies) || b.locs[0].Offset != 0 {
		t.Fatalf("locations %+v", b.locs)
	}
	for i, loc := range b.locs {
		l, err := decodeMember(obj[loc.Offset : loc.Offset+loc.Length])
		if err != nil {
			t.Fatalf("member %d: %v", i, err)
		}
		got, err := l.RawBody()
		if err != nil || !bytes.Equal(got, bodies[i]) || l.ID != int64(i+1) {
			t.Fatalf("member %d: body %q, %v, line %+v", i, got, err, l)
		}
		if (l.BodyBase64 != nil) != (i == 2) {
			t.Fatalf("member %d: base64 %v", i, l.BodyBase64 != nil)
		}
	}
	// The whole object is one .jsonl.gz: one line per event.
	lines := bytes.Split(bytes.TrimSuffix(zcat(t, obj), []byte("\n")), []byte("\n"))
	if len(lines) != len(bodies) {
		t.Fatalf("zcat gave %d lines", len(lines))
	}
	// Deterministic: the same events give the same bytes.
	b2 := newObjectBuilder()
	for i, body := range bodies {
		_ = b2.add(event(int64(i+1), body))
	}
	if !bytes.Equal(obj, b2.buf.Bytes()) {
		t.Fatal("the same batch built two different objects")
	}
}

func TestDecodeMemberRefusals(t *testing.T) {
	t.Parallel()
	b := newObjectBuilder()
	_ = b.add(event(1, []byte(`{}`)))
	_ = b.add(event(2, []byte(`{}`)))
	obj := b.buf.Bytes()
	one := obj[:b.locs[0].Length]
	cases := map[string][]byte{
		"two members":    obj,
		"truncated":      one[:len(one)-3],
		"not gzip":       []byte("hello, world, this is not gzip"),
		"flipped byte":   append(append([]byte{}, one[:15]...), append([]byte{one[15] ^ 0xff}, one[16:]...)...),
		"not one line":   gz(t, "{\"v\":1}\n{\"v\":1}\n"),
		"no newline":     gz(t, `{"v":1}`),
		"other version":  gz(t, "{\"v\":2}\n"),
		"not json":       gz(t, "hello\n"),
		"empty (padded)": mustPad(t, 40),
	}
	for name, member := range cases {
		if _, err := decodeMember(member); err == nil {
			t.Errorf("%s: decoded", name)
		}
	}
	if _, err := decodeMember(mustPad(t, 40)); !errors.Is(err, errEmptyMember) {
		t.Errorf("padding: %v", err)
	}
}

func gz(t *testing.T, s string) []byte {
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	_, _ = zw.Write([]byte(s))
	_ = zw.Close()
	return buf.Bytes()
}

func mustPad(t *testing.T, n int64) []byte {
	t.Helper()
	p, err := paddingMembers(n)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func TestPaddingMembers(t *testing.T) {
	t.Parallel()
	for _, n := range []int64{minPadding, minPadding + 1, 1000, maxPadding - 1, maxPadding, maxPadding + 1,
		maxPadding + minPadding - 1, maxPadding + minPadding, 3*maxPadding + 7} {
		p := mustPad(t, n)
		if int64(len(p)) != n {
			t.Fatalf("pad %d: got %d bytes", n, len(p))
		}
		if out := gunzipAll(t, p); len(out) != 0 {
			t.Fatalf("pad %d: decompresses to %q", n, out)
		}
	}
	if _, err := paddingMembers(minPadding - 1); err == nil {
		t.Fatal("padding below the minimum accepted")
	}

	// An object with a member replaced by padding: zcat gives the other
	// lines, unchanged and in place.
	b := newObjectBuilder()
	for i := range 3 {
		_ = b.add(event(int64(i+1), []byte(`{"n":`+string(rune('0'+i))+`}`)))
	}
	obj := bytes.Clone(b.buf.Bytes())
	mid := b.locs[1]
	copy(obj[mid.Offset:mid.Offset+mid.Length], mustPad(t, mid.Length))
	lines := bytes.Split(bytes.TrimSuffix(zcat(t, obj), []byte("\n")), []byte("\n"))
	if len(lines) != 2 || !bytes.Contains(lines[0], []byte(`"id":1`)) || !bytes.Contains(lines[1], []byte(`"id":3`)) {
		t.Fatalf("zcat after padding: %q", lines)
	}
	for _, i := range []int{0, 2} {
		loc := b.locs[i]
		if _, err := decodeMember(obj[loc.Offset : loc.Offset+loc.Length]); err != nil {
			t.Fatalf("member %d after padding its neighbour: %v", i, err)
		}
	}
}
