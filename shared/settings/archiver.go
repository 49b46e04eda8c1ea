package settings

import (
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"time"

	"github.com/webhook-inbox/webhook-inbox/shared/blobstore"
)

// The archiver's environment variables (besides DATABASE_URL and LOG_LEVEL).
const (
	EnvArchiveBucket        = "ARCHIVE_BUCKET"
	EnvArchivePrefix        = "ARCHIVE_PREFIX"
	EnvArchiveMinAge        = "ARCHIVE_MIN_AGE"
	EnvArchiveBatchSize     = "ARCHIVE_BATCH_SIZE"
	EnvArchiveMaxBatchBytes = "ARCHIVE_MAX_BATCH_BYTES"
	EnvArchiveSSE           = "ARCHIVE_SSE"
	EnvArchiveKMSKeyID      = "ARCHIVE_KMS_KEY_ID"
	// EnvS3Endpoint overrides the S3 endpoint (a local S3-compatible
	// server); unset in AWS.
	EnvS3Endpoint = "S3_ENDPOINT"
	// EnvS3PathStyle forces path-style addressing (true/false); it
	// defaults to true when S3_ENDPOINT is set, as local servers need.
	EnvS3PathStyle = "S3_PATH_STYLE"
	// EnvS3AccessKeyID and EnvS3SecretAccessKey are static keys for the
	// server at S3_ENDPOINT. Unset, the SDK's default chain applies (the
	// Lambda's role, AWS_* variables, profiles).
	EnvS3AccessKeyID     = "S3_ACCESS_KEY_ID"
	EnvS3SecretAccessKey = "S3_SECRET_ACCESS_KEY"
	// EnvAWSRegion is the region, which Lambda sets.
	EnvAWSRegion = "AWS_REGION"
)

// Archiver defaults, mirrored from package archive (which settings does
// not import, to stay a leaf that only reads the environment).
const (
	defaultArchiveMinAge        = 7 * 24 * time.Hour
	defaultArchiveBatchSize     = 1000
	defaultArchiveMaxBatchBytes = 32 << 20
	// maxArchiveBatchSize keeps one batch's ids in a sane bound for one
	// statement and one object.
	maxArchiveBatchSize = 100_000
)

// Archiver is the archiver's configuration.
type Archiver struct {
	Database Database
	// S3 is the bucket and how to reach it.
	S3 blobstore.Config
	// Prefix of every object key.
	Prefix        string
	MinAge        time.Duration
	BatchSize     int
	MaxBatchBytes int64
	LogLevel      slog.Level
	// MetricsNamespace is the CloudWatch namespace ("" = the default).
	MetricsNamespace string
}

// LoadArchiver reads the archiver's configuration with getenv, reporting
// every problem at once, each naming its variable.
func LoadArchiver(getenv func(string) string) (Archiver, error) {
	var errs []error
	db, err := LoadDatabase(getenv)
	if err != nil {
		errs = append(errs, err)
	}
	a := Archiver{
		Database:         db,
		MetricsNamespace: getenv(EnvMetricsNamespace),
		Prefix:           strings.Trim(getenv(EnvArchivePrefix), "/"),
		MinAge:           defaultArchiveMinAge,
		BatchSize:        defaultArchiveBatchSize,
		MaxBatchBytes:    defaultArchiveMaxBatchBytes,
		S3: blobstore.Config{
			Bucket:          getenv(EnvArchiveBucket),
			Region:          getenv(EnvAWSRegion),
			Endpoint:        getenv(EnvS3Endpoint),
			AccessKeyID:     getenv(EnvS3AccessKeyID),
			SecretAccessKey: getenv(EnvS3SecretAccessKey),
			SSE:             getenv(EnvArchiveSSE),
			KMSKeyID:        getenv(EnvArchiveKMSKeyID),
		},
	}
	if a.S3.Bucket == "" {
		errs = append(errs, fmt.Errorf("%s is not set", EnvArchiveBucket))
	}
	if v := getenv(EnvArchiveMinAge); v != "" {
		d, err := parseAge(v)
		if err != nil || d <= 0 {
			errs = append(errs, fmt.Errorf("%s must be a positive duration such as 168h or 7d, got %q", EnvArchiveMinAge, v))
		}
		a.MinAge = d
	}
	if v := getenv(EnvArchiveBatchSize); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n <= 0 || n > maxArchiveBatchSize {
			errs = append(errs, fmt.Errorf("%s must be a number of events from 1 to %d, got %q", EnvArchiveBatchSize, maxArchiveBatchSize, v))
		}
		a.BatchSize = n
	}
	if v := getenv(EnvArchiveMaxBatchBytes); v != "" {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n <= 0 {
			errs = append(errs, fmt.Errorf("%s must be a positive number of bytes, got %q", EnvArchiveMaxBatchBytes, v))
		}
		a.MaxBatchBytes = n
	}
	switch a.S3.SSE {
	case "", blobstore.SSES3, blobstore.SSEKMS:
	default:
		errs = append(errs, fmt.Errorf("%s must be %s or %s, got %q", EnvArchiveSSE, blobstore.SSES3, blobstore.SSEKMS, a.S3.SSE))
	}
	if a.S3.KMSKeyID != "" && a.S3.SSE != blobstore.SSEKMS {
		errs = append(errs, fmt.Errorf("%s is set but %s is not %s", EnvArchiveKMSKeyID, EnvArchiveSSE, blobstore.SSEKMS))
	}
	a.S3.PathStyle = a.S3.Endpoint != ""
	if v := getenv(EnvS3PathStyle); v != "" {
		b, err := strconv.ParseBool(v)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s must be true or false, got %q", EnvS3PathStyle, v))
		}
		a.S3.PathStyle = b
	}
	if (a.S3.AccessKeyID == "") != (a.S3.SecretAccessKey == "") {
		errs = append(errs, fmt.Errorf("%s and %s go together", EnvS3AccessKeyID, EnvS3SecretAccessKey))
	}
	lvl, err := LogLevel(getenv)
	if err != nil {
		errs = append(errs, err)
	}
	a.LogLevel = lvl
	return a, errors.Join(errs...)
}
