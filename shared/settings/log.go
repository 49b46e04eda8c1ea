package settings

import (
	"bytes"
	"context"
	"encoding"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strconv"
	"strings"
	"sync"
	"unicode"
)

// EnvLogLevel is the least level logged: debug, info (the default), warn
// or error.
const EnvLogLevel = "LOG_LEVEL"

// EnvLambdaLogLevel is the level Lambda sets from the function's
// LoggingConfig.ApplicationLogLevel (TRACE, DEBUG, INFO, WARN, ERROR or
// FATAL). Lambda drops every JSON line whose "level" is below it before
// CloudWatch Logs sees it, so a function logs at that level rather than
// write lines that are thrown away:
// https://docs.aws.amazon.com/lambda/latest/dg/monitoring-cloudwatchlogs-log-level.html
const EnvLambdaLogLevel = "AWS_LAMBDA_LOG_LEVEL"

// LogLevel reads the least level to log: AWS_LAMBDA_LOG_LEVEL when Lambda
// sets it (what Lambda keeps is what is worth writing), else LOG_LEVEL
// (debug, info, warn, error), else info. slog has no TRACE or FATAL:
// TRACE logs everything (debug), FATAL nothing this code writes (above
// error), as Lambda would keep.
func LogLevel(getenv func(string) string) (slog.Level, error) {
	if v := getenv(EnvLambdaLogLevel); v != "" {
		switch strings.ToUpper(v) {
		case "TRACE":
			return slog.LevelDebug, nil
		case "DEBUG":
			return slog.LevelDebug, nil
		case "INFO":
			return slog.LevelInfo, nil
		case "WARN":
			return slog.LevelWarn, nil
		case "ERROR":
			return slog.LevelError, nil
		case "FATAL":
			return slog.LevelError + 4, nil
		}
		return slog.LevelInfo, fmt.Errorf("%s must be TRACE, DEBUG, INFO, WARN, ERROR or FATAL, got %q", EnvLambdaLogLevel, v)
	}
	v := getenv(EnvLogLevel)
	if v == "" {
		return slog.LevelInfo, nil
	}
	var lvl slog.Level
	if err := lvl.UnmarshalText([]byte(strings.ToUpper(v))); err != nil {
		return slog.LevelInfo, fmt.Errorf("%s must be debug, info, warn or error, got %q", EnvLogLevel, v)
	}
	return lvl, nil
}

// Logger returns the JSON logger the Lambdas write to stdout, where Lambda
// sends it to CloudWatch Logs: one JSON object per line, which CloudWatch
// Logs Insights queries by key and turns into metrics when the line is an
// EMF record.
func Logger(level slog.Level) *slog.Logger {
	return JSONLogger(os.Stdout, level)
}

// JSONLogger is Logger writing to w (the operator CLI writes to standard
// error, so its output stays its own).
func JSONLogger(w io.Writer, level slog.Level) *slog.Logger {
	return slog.New(slog.NewJSONHandler(w, &slog.HandlerOptions{Level: level}))
}

// LoggerFromEnv returns Logger at LogLevel's level.
func LoggerFromEnv(getenv func(string) string) (*slog.Logger, error) {
	lvl, err := LogLevel(getenv)
	return Logger(lvl), err
}

// ReadableLogger returns a logger whose lines are written for a person at
// a terminal (the dev stack): time, level, message, then key=value pairs,
// no JSON.
func ReadableLogger(w io.Writer, level slog.Level) *slog.Logger {
	return slog.New(NewReadableHandler(w, &slog.HandlerOptions{Level: level}))
}

// NewReadableHandler returns the handler of ReadableLogger. A line reads
//
//	15:04:05.000 INFO  webhook accepted source=stripe event_id=evt_1 id=3
//
// Values with spaces, quotes, '=' or control characters are quoted (Go
// syntax), so a line is always one line and splits unambiguously; groups
// prefix their keys ("stats.claimed=2"); structs print as {Field:value}.
func NewReadableHandler(w io.Writer, opts *slog.HandlerOptions) slog.Handler {
	if opts == nil {
		opts = &slog.HandlerOptions{}
	}
	return &readableHandler{mu: &sync.Mutex{}, w: w, opts: *opts}
}

type readableHandler struct {
	mu   *sync.Mutex // shared by the handlers derived with WithAttrs/WithGroup
	w    io.Writer
	opts slog.HandlerOptions
	// pre holds the WithAttrs pairs, already formatted; group is the
	// WithGroup prefix of the attributes added later.
	pre   string
	group string
}

func (h *readableHandler) Enabled(_ context.Context, l slog.Level) bool {
	min := slog.LevelInfo
	if h.opts.Level != nil {
		min = h.opts.Level.Level()
	}
	return l >= min
}

func (h *readableHandler) Handle(_ context.Context, r slog.Record) error {
	var b bytes.Buffer
	if !r.Time.IsZero() {
		b.WriteString(r.Time.Format("15:04:05.000"))
		b.WriteByte(' ')
	}
	fmt.Fprintf(&b, "%-5s %s", r.Level.String(), oneLine(r.Message))
	b.WriteString(h.pre)
	r.Attrs(func(a slog.Attr) bool {
		appendAttr(&b, h.group, a)
		return true
	})
	b.WriteByte('\n')
	h.mu.Lock()
	defer h.mu.Unlock()
	_, err := h.w.Write(b.Bytes())
	return err
}

func (h *readableHandler) WithAttrs(as []slog.Attr) slog.Handler {
	var b bytes.Buffer
	for _, a := range as {
		appendAttr(&b, h.group, a)
	}
	c := *h
	c.pre += b.String()
	return &c
}

func (h *readableHandler) WithGroup(name string) slog.Handler {
	if name == "" {
		return h
	}
	c := *h
	c.group = h.group + name + "."
	return &c
}

// appendAttr writes " key=value", or one pair per member of a group.
func appendAttr(b *bytes.Buffer, prefix string, a slog.Attr) {
	a.Value = a.Value.Resolve()
	if a.Equal(slog.Attr{}) {
		return
	}
	if a.Value.Kind() == slog.KindGroup {
		p := prefix
		if a.Key != "" {
			p += a.Key + "."
		}
		for _, m := range a.Value.Group() {
			appendAttr(b, p, m)
		}
		return
	}
	b.WriteByte(' ')
	b.WriteString(prefix + a.Key)
	b.WriteByte('=')
	b.WriteString(quoteIfNeeded(valueText(a.Value)))
}

// valueText renders a value for a person: errors by their message, times
// in UTC to the millisecond, durations as Go writes them.
func valueText(v slog.Value) string {
	switch v.Kind() {
	case slog.KindString:
		return v.String()
	case slog.KindTime:
		return v.Time().UTC().Format("2006-01-02T15:04:05.000Z")
	case slog.KindDuration:
		return v.Duration().String()
	case slog.KindAny:
		switch x := v.Any().(type) {
		case error:
			return x.Error()
		case fmt.Stringer:
			return x.String()
		case encoding.TextMarshaler:
			if t, err := x.MarshalText(); err == nil {
				return string(t)
			}
		case []byte:
			return strconv.Quote(string(x))
		}
		return fmt.Sprintf("%+v", v.Any())
	}
	return v.String()
}

// quoteIfNeeded quotes s when it would not read back as one value.
func quoteIfNeeded(s string) string {
	if s == "" {
		return `""`
	}
	for _, r := range s {
		if unicode.IsSpace(r) || r == '"' || r == '=' || !unicode.IsPrint(r) {
			return strconv.Quote(s)
		}
	}
	return s
}

// oneLine keeps a message on its line.
func oneLine(s string) string {
	if strings.ContainsAny(s, "\r\n") {
		return strings.NewReplacer("\r\n", " ", "\r", " ", "\n", " ").Replace(s)
	}
	return s
}
