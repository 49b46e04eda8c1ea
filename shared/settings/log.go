package settings

import (
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"
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
