package archive

import (
	"bytes"
	"compress/gzip"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"time"
	"unicode/utf8"

	"github.com/webhook-inbox/webhook-inbox/shared/inbox"
	"github.com/webhook-inbox/webhook-inbox/shared/storage"
)

// FormatVersion is the "v" of every line; a reader refuses other versions
// rather than misread them.
const FormatVersion = 1

// ContentType of archive objects: the object is a gzip file (.jsonl.gz), not
// JSON sent with Content-Encoding: gzip, which HTTP clients might
// decompress on the fly and so break ranged reads of single members.
const ContentType = "application/gzip"

// Line is one event in an archive object: a JSON object on one line.
//
// The raw body is lossless: Body holds it as a JSON string when it is valid
// UTF-8 (what JSON webhooks always are; decoding the string gives back the
// exact bytes), else BodyBase64 holds it base64-encoded. Exactly one of the
// two is present.
type Line struct {
	V  int   `json:"v"`
	ID int64 `json:"id"`
	// Source is the event's source; the key says "provider", as the
	// column does, and the format never changes under its readers.
	Source      string    `json:"provider"`
	EventID     string    `json:"event_id"`
	EventType   string    `json:"event_type"`
	CreatedAt   time.Time `json:"created_at"`
	ProcessedAt time.Time `json:"processed_at"`
	BodySHA256  string    `json:"body_sha256"`
	BodySize    int       `json:"body_size"`
	Body        *string   `json:"body,omitempty"`
	BodyBase64  []byte    `json:"body_base64,omitempty"`
}

// lineOf returns the line of an event.
func lineOf(e *inbox.Event) Line {
	l := Line{
		V:           FormatVersion,
		ID:          e.ID,
		Source:      e.Source,
		EventID:     e.EventID,
		EventType:   e.Type,
		CreatedAt:   e.CreatedAt.UTC(),
		ProcessedAt: e.ProcessedAt.UTC(),
		BodySHA256:  hex.EncodeToString(e.BodySHA256),
		BodySize:    e.BodySize,
	}
	if utf8.Valid(e.Body) {
		s := string(e.Body)
		l.Body = &s
	} else {
		// encoding/json would replace invalid UTF-8 with U+FFFD: lossy.
		l.BodyBase64 = e.Body
		if l.BodyBase64 == nil {
			l.BodyBase64 = []byte{}
		}
	}
	return l
}

// RawBody returns the line's body bytes.
func (l Line) RawBody() ([]byte, error) {
	switch {
	case l.Body != nil && l.BodyBase64 == nil:
		return []byte(*l.Body), nil
	case l.Body == nil && l.BodyBase64 != nil:
		return l.BodyBase64, nil
	default:
		return nil, errors.New("line has neither or both of body and body_base64")
	}
}

// objectBuilder writes an archive object: one gzip member per event, each
// holding one line, concatenated. A concatenation of gzip members is a gzip
// file (RFC 1952, section 2.2), so the object as a whole is a .jsonl.gz that
// zcat and Athena read, while each member can be fetched alone with a ranged
// GET and decompressed on its own.
type objectBuilder struct {
	buf  bytes.Buffer
	zw   *gzip.Writer
	line bytes.Buffer
	enc  *json.Encoder
	locs []storage.ArchiveLocation
}

func newObjectBuilder() *objectBuilder {
	b := &objectBuilder{}
	// One writer, Reset per member: a flate compressor is ~1MB of state.
	// The header stays empty (no name, ModTime 0), so the same batch gives
	// the same bytes on every run.
	b.zw, _ = gzip.NewWriterLevel(&b.buf, gzip.DefaultCompression)
	b.enc = json.NewEncoder(&b.line)
	// Bodies are data, not HTML: no \u003c escapes.
	b.enc.SetEscapeHTML(false)
	return b
}

// add appends one event as its own gzip member and records its byte range.
func (b *objectBuilder) add(e *inbox.Event) error {
	b.line.Reset()
	if err := b.enc.Encode(lineOf(e)); err != nil { // Encode appends "\n"
		return fmt.Errorf("encode event %d: %w", e.ID, err)
	}
	off := int64(b.buf.Len())
	b.zw.Reset(&b.buf)
	if _, err := b.zw.Write(b.line.Bytes()); err != nil {
		return fmt.Errorf("compress event %d: %w", e.ID, err)
	}
	if err := b.zw.Close(); err != nil {
		return fmt.Errorf("compress event %d: %w", e.ID, err)
	}
	b.locs = append(b.locs, storage.ArchiveLocation{EventPK: e.ID, Offset: off, Length: int64(b.buf.Len()) - off})
	return nil
}

// maxLineBytes bounds what decoding one member may produce, against a
// corrupt or hostile object: far above any body the receiver accepts
// (1 MiB by default, 4/3 of that in base64).
const maxLineBytes = 64 << 20

// errEmptyMember is a member with no line: the padding an expunge leaves.
var errEmptyMember = errors.New("no event in this member (expunged)")

// decodeMember decodes exactly one gzip member holding one line.
func decodeMember(member []byte) (Line, error) {
	var l Line
	r := bytes.NewReader(member)
	zr, err := gzip.NewReader(r)
	if err != nil {
		return l, fmt.Errorf("gzip member: %w", err)
	}
	zr.Multistream(false)
	data, err := io.ReadAll(io.LimitReader(zr, maxLineBytes+1))
	if err != nil {
		return l, fmt.Errorf("gzip member: %w", err)
	}
	if len(data) > maxLineBytes {
		return l, fmt.Errorf("gzip member: line longer than %d bytes", maxLineBytes)
	}
	if r.Len() != 0 {
		return l, fmt.Errorf("gzip member: %d bytes after the member", r.Len())
	}
	if len(data) == 0 {
		return l, errEmptyMember
	}
	if data[len(data)-1] != '\n' || bytes.IndexByte(data[:len(data)-1], '\n') >= 0 {
		return l, errors.New("gzip member: not exactly one line")
	}
	if err := json.Unmarshal(data, &l); err != nil {
		return l, fmt.Errorf("line: %w", err)
	}
	if l.V != FormatVersion {
		return l, fmt.Errorf("line: format version %d, want %d", l.V, FormatVersion)
	}
	return l, nil
}

// Padding members: an expunge replaces an event's member with gzip members
// that decompress to nothing, of exactly the same total length, so that the
// object stays a valid .jsonl.gz without the line and no other event's
// offset moves. The length is made up in the gzip header's FEXTRA field
// (RFC 1952, 2.3.1.1), which readers skip: one subfield "WX" of zeros.
//
//	1f 8b 08 04 | 00000000 | 00 ff | XLEN | 'W' 'X' LEN zeros... | 03 00 | CRC32=0 | ISIZE=0
//
// 03 00 is an empty final deflate block (fixed Huffman, end of block only).
const (
	paddingOverhead = 10 + 2 + 4 + 2 + 8 // header, XLEN, subfield header, deflate, trailer
	minPadding      = paddingOverhead
	maxPadding      = paddingOverhead + 0xffff - 4 // XLEN is 16 bits and includes the subfield header
)

// paddingMembers returns n bytes of empty gzip members.
func paddingMembers(n int64) ([]byte, error) {
	if n < minPadding {
		return nil, fmt.Errorf("cannot pad %d bytes (minimum %d)", n, minPadding)
	}
	out := make([]byte, 0, n)
	for n > 0 {
		size := n
		if size > maxPadding {
			// Leave at least a minimal member for the rest.
			size = min(maxPadding, n-minPadding)
		}
		out = appendPadding(out, int(size))
		n -= size
	}
	return out, nil
}

func appendPadding(out []byte, size int) []byte {
	data := size - paddingOverhead
	out = append(out, 0x1f, 0x8b, 8, 4, 0, 0, 0, 0, 0, 0xff)
	out = binary.LittleEndian.AppendUint16(out, uint16(4+data))
	out = append(out, 'W', 'X')
	out = binary.LittleEndian.AppendUint16(out, uint16(data))
	out = append(out, make([]byte, data)...)
	out = append(out, 3, 0)
	return append(out, 0, 0, 0, 0, 0, 0, 0, 0)
}
