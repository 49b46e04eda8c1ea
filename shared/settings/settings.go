// Package settings reads the functions' configuration from the environment
// once, at start-up, and fails with a message naming the variable, so a
// misconfigured Lambda dies at init instead of refusing webhooks one by one.
package settings

import (
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"time"

	"github.com/webhook-inbox/webhook-inbox/shared/receiver"
	"github.com/webhook-inbox/webhook-inbox/shared/source"
	"github.com/webhook-inbox/webhook-inbox/shared/storage"
)

// Environment variable names.
const (
	EnvDatabaseURL  = "DATABASE_URL"
	EnvMaxBodyBytes = "WEBHOOK_MAX_BODY_BYTES"
	EnvStoreTimeout = "WEBHOOK_STORE_TIMEOUT"
	// EnvMetricsNamespace is the CloudWatch namespace of the EMF metrics.
	EnvMetricsNamespace = "METRICS_NAMESPACE"
	// EnvDatabaseQueryMode is how statements are sent (storage.QueryModes);
	// "exec" behind RDS Proxy or PgBouncer.
	EnvDatabaseQueryMode = "DATABASE_QUERY_MODE"
)

// Database is the connection configuration every function shares.
type Database struct {
	URL       string
	QueryMode string
}

// LoadDatabase reads DATABASE_URL (already resolved from a secret by
// secrets.Environment when one is used) and DATABASE_QUERY_MODE.
func LoadDatabase(getenv func(string) string) (Database, error) {
	var errs []error
	d := Database{URL: getenv(EnvDatabaseURL), QueryMode: getenv(EnvDatabaseQueryMode)}
	if d.URL == "" {
		errs = append(errs, fmt.Errorf("%s (or DATABASE_SECRET_ARN) is not set", EnvDatabaseURL))
	}
	if _, ok := storage.QueryModes[d.QueryMode]; d.QueryMode != "" && !ok {
		errs = append(errs, fmt.Errorf("%s must be one of cache_statement, cache_describe, describe_exec, exec, simple_protocol; got %q", EnvDatabaseQueryMode, d.QueryMode))
	}
	return d, errors.Join(errs...)
}

// Receiver is the receiver's configuration.
type Receiver struct {
	Database     Database
	Sources      *source.Set
	MaxBodyBytes int64
	StoreTimeout time.Duration
	LogLevel     slog.Level
	// MetricsNamespace is the CloudWatch namespace ("" = the default).
	MetricsNamespace string
}

// LoadReceiver reads the receiver's configuration with getenv.
func LoadReceiver(getenv func(string) string) (Receiver, error) {
	var errs []error
	db, err := LoadDatabase(getenv)
	if err != nil {
		errs = append(errs, err)
	}
	r := Receiver{
		Database:     db,
		MaxBodyBytes: receiver.DefaultMaxBodyBytes,
		StoreTimeout: receiver.DefaultStoreTimeout,

		MetricsNamespace: getenv(EnvMetricsNamespace),
	}
	set, err := source.Load(getenv)
	if err != nil {
		errs = append(errs, err)
	}
	r.Sources = set
	if v := getenv(EnvMaxBodyBytes); v != "" {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n <= 0 {
			errs = append(errs, fmt.Errorf("%s must be a positive number of bytes, got %q", EnvMaxBodyBytes, v))
		}
		r.MaxBodyBytes = n
	}
	if v := getenv(EnvStoreTimeout); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d <= 0 {
			errs = append(errs, fmt.Errorf("%s must be a positive duration such as 5s, got %q", EnvStoreTimeout, v))
		}
		r.StoreTimeout = d
	}
	lvl, err := LogLevel(getenv)
	if err != nil {
		errs = append(errs, err)
	}
	r.LogLevel = lvl
	return r, errors.Join(errs...)
}
