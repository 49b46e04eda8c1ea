// Package blobstore is the S3 adapter: the few object operations the archive
// needs (put with server-side encryption and a SHA-256 checksum, head,
// ranged get, delete, list) over aws-sdk-go-v2, against AWS or any
// S3-compatible server through an endpoint override.
//
// The same client code runs in Lambda and on a developer's machine; only the
// Config differs (an endpoint, path-style addressing and static keys for the
// local server, the default credential chain and region in AWS).
package blobstore

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
	"github.com/aws/smithy-go"
	smithyhttp "github.com/aws/smithy-go/transport/http"
)

// Server-side encryption modes for Config.SSE.
const (
	// SSES3 is encryption with keys S3 manages (AES256), the default: it is
	// free and needs no key policy.
	SSES3 = "AES256"
	// SSEKMS is encryption with a KMS key (Config.KMSKeyID, or the
	// account's aws/s3 key when empty).
	SSEKMS = "aws:kms"
)

// DefaultRegion is used when neither Config.Region nor the environment
// (AWS_REGION, which Lambda sets) names one.
const DefaultRegion = "us-east-1"

// Config says which bucket to use and how to reach it.
type Config struct {
	// Bucket holds the objects. Required.
	Bucket string
	// Region of the bucket; "" means the SDK's default chain (AWS_REGION),
	// else DefaultRegion.
	Region string
	// Endpoint overrides the S3 endpoint, e.g. http://127.0.0.1:7070 for a
	// local server. "" means AWS.
	Endpoint string
	// PathStyle addresses buckets as endpoint/bucket/key rather than
	// bucket.endpoint/key: what local servers need.
	PathStyle bool
	// AccessKeyID and SecretAccessKey are static credentials (a local
	// server). Empty means the SDK's default chain (the Lambda's role).
	AccessKeyID     string
	SecretAccessKey string
	// SSE is the server-side encryption requested on every upload: SSES3
	// (default) or SSEKMS.
	SSE string
	// KMSKeyID is the KMS key for SSEKMS; "" means the aws/s3 key.
	KMSKeyID string
	// MaxAttempts bounds the SDK's tries per request, the first included
	// (S3_MAX_ATTEMPTS); 0 keeps the SDK's default (3).
	MaxAttempts int
}

// Store performs object operations on one bucket. It is safe for concurrent
// use.
type Store struct {
	client *s3.Client
	bucket string
	sse    types.ServerSideEncryption
	kmsKey string
}

// Open builds an S3 client from cfg and returns a Store over its bucket. It
// makes no request: a bucket that is unreachable now fails the first call.
func Open(ctx context.Context, cfg Config) (*Store, error) {
	if cfg.Bucket == "" {
		return nil, errors.New("blobstore: no bucket configured")
	}
	sse := types.ServerSideEncryption(SSES3)
	switch cfg.SSE {
	case "", SSES3:
	case SSEKMS:
		sse = types.ServerSideEncryptionAwsKms
	default:
		return nil, fmt.Errorf("blobstore: server-side encryption %q is not %s or %s", cfg.SSE, SSES3, SSEKMS)
	}
	var opts []func(*config.LoadOptions) error
	if cfg.Region != "" {
		opts = append(opts, config.WithRegion(cfg.Region))
	}
	if cfg.AccessKeyID != "" || cfg.SecretAccessKey != "" {
		opts = append(opts, config.WithCredentialsProvider(
			credentials.NewStaticCredentialsProvider(cfg.AccessKeyID, cfg.SecretAccessKey, "")))
	}
	if cfg.MaxAttempts > 0 {
		opts = append(opts, config.WithRetryMaxAttempts(cfg.MaxAttempts))
	}
	awsCfg, err := config.LoadDefaultConfig(ctx, opts...)
	if err != nil {
		return nil, fmt.Errorf("blobstore: load AWS configuration: %w", err)
	}
	if awsCfg.Region == "" {
		awsCfg.Region = DefaultRegion
	}
	client := s3.NewFromConfig(awsCfg, func(o *s3.Options) {
		if cfg.Endpoint != "" {
			o.BaseEndpoint = aws.String(cfg.Endpoint)
		}
		o.UsePathStyle = cfg.PathStyle
		// Ranged GETs carry no whole-object checksum to validate, by
		// design (archive.Body checks the event's SHA-256 instead); the SDK
		// would log that on every read.
		o.DisableLogOutputChecksumValidationSkipped = true
	})
	return &Store{client: client, bucket: cfg.Bucket, sse: sse, kmsKey: cfg.KMSKeyID}, nil
}

// Object describes a stored object.
type Object struct {
	Key  string
	Size int64
	// SHA256 is the object's SHA-256: computed locally by Put, as reported
	// by S3 for Head (nil when the server keeps none, e.g. an object
	// uploaded without a checksum).
	SHA256 []byte
	ETag   string
	// VersionID is set when the bucket has versioning enabled.
	VersionID string
	// LastModified is when the object was stored (List, ListVersions).
	LastModified time.Time
	// ContentType and Metadata (the x-amz-meta-* headers, keys in lower
	// case) are what Head reports.
	ContentType string
	Metadata    map[string]string
}

// Version is one version of an object in a versioned bucket: an object's
// bytes, or a delete marker (which holds none).
type Version struct {
	Key          string
	VersionID    string
	Size         int64
	IsLatest     bool
	DeleteMarker bool
	LastModified time.Time
}

// ErrNotFound is returned (wrapped) when the object or bucket does not exist.
var ErrNotFound = errors.New("object not found")

// ErrChecksumMismatch is returned (wrapped) when S3 reports a checksum other
// than the one of the bytes sent: the stored object cannot be trusted.
var ErrChecksumMismatch = errors.New("checksum mismatch")

// Put stores data at key, with server-side encryption and a SHA-256
// checksum that S3 verifies before storing anything: a PUT that succeeds
// stored exactly these bytes. An existing object at key is replaced.
func (s *Store) Put(ctx context.Context, key string, data []byte, contentType string) (Object, error) {
	return s.PutWithMetadata(ctx, key, data, contentType, nil)
}

// PutWithMetadata is Put with user metadata (x-amz-meta-<key> headers;
// S3 keeps at most 2 KB of it per object), which Head returns.
func (s *Store) PutWithMetadata(ctx context.Context, key string, data []byte, contentType string, metadata map[string]string) (Object, error) {
	sum := sha256.Sum256(data)
	sum64 := base64.StdEncoding.EncodeToString(sum[:])
	in := &s3.PutObjectInput{
		Bucket:               aws.String(s.bucket),
		Key:                  aws.String(key),
		Body:                 bytes.NewReader(data),
		ContentLength:        aws.Int64(int64(len(data))),
		ContentType:          aws.String(contentType),
		ChecksumAlgorithm:    types.ChecksumAlgorithmSha256,
		ChecksumSHA256:       aws.String(sum64),
		ServerSideEncryption: s.sse,
		Metadata:             metadata,
	}
	if s.sse == types.ServerSideEncryptionAwsKms && s.kmsKey != "" {
		in.SSEKMSKeyId = aws.String(s.kmsKey)
	}
	out, err := s.client.PutObject(ctx, in)
	if err != nil {
		return Object{}, s.wrap("put", key, err)
	}
	if out.ChecksumSHA256 != nil && *out.ChecksumSHA256 != sum64 {
		return Object{}, fmt.Errorf("s3 put %s/%s: S3 reports SHA-256 %s, sent %s: %w", s.bucket, key, *out.ChecksumSHA256, sum64, ErrChecksumMismatch)
	}
	return Object{Key: key, Size: int64(len(data)), SHA256: sum[:], ETag: aws.ToString(out.ETag), VersionID: aws.ToString(out.VersionId)}, nil
}

// Head returns the object's size, content type, metadata and, when S3
// keeps one, its SHA-256.
func (s *Store) Head(ctx context.Context, key string) (Object, error) {
	out, err := s.client.HeadObject(ctx, &s3.HeadObjectInput{
		Bucket:       aws.String(s.bucket),
		Key:          aws.String(key),
		ChecksumMode: types.ChecksumModeEnabled,
	})
	if err != nil {
		return Object{}, s.wrap("head", key, err)
	}
	o := Object{Key: key, Size: aws.ToInt64(out.ContentLength), ETag: aws.ToString(out.ETag), VersionID: aws.ToString(out.VersionId),
		ContentType: aws.ToString(out.ContentType), Metadata: out.Metadata}
	if out.ChecksumSHA256 != nil {
		// Only a full-object checksum is the SHA-256 of the bytes; a
		// composite one (multipart uploads, "<b64>-<parts>") is not.
		if b, err := base64.StdEncoding.DecodeString(*out.ChecksumSHA256); err == nil && len(b) == sha256.Size {
			o.SHA256 = b
		}
	}
	return o, nil
}

// Get returns the whole object.
func (s *Store) Get(ctx context.Context, key string) ([]byte, error) {
	out, err := s.client.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String(s.bucket), Key: aws.String(key)})
	if err != nil {
		return nil, s.wrap("get", key, err)
	}
	defer out.Body.Close()
	b, err := io.ReadAll(out.Body)
	if err != nil {
		return nil, s.wrap("get", key, err)
	}
	return b, nil
}

// GetRange returns length bytes of the object from offset: one ranged GET.
// It fails unless exactly that many bytes come back.
func (s *Store) GetRange(ctx context.Context, key string, offset, length int64) ([]byte, error) {
	if offset < 0 || length <= 0 {
		return nil, fmt.Errorf("s3 get %s/%s: invalid range offset %d length %d", s.bucket, key, offset, length)
	}
	out, err := s.client.GetObject(ctx, &s3.GetObjectInput{
		Bucket: aws.String(s.bucket),
		Key:    aws.String(key),
		Range:  aws.String(fmt.Sprintf("bytes=%d-%d", offset, offset+length-1)),
	})
	if err != nil {
		return nil, s.wrap("get range", key, err)
	}
	defer out.Body.Close()
	// One byte more than asked reveals a server that ignored the range.
	b, err := io.ReadAll(io.LimitReader(out.Body, length+1))
	if err != nil {
		return nil, s.wrap("get range", key, err)
	}
	if int64(len(b)) != length {
		return nil, fmt.Errorf("s3 get range %s/%s [%d,+%d): got %d bytes", s.bucket, key, offset, length, len(b))
	}
	return b, nil
}

// Delete removes the object. Deleting a missing object succeeds, as in S3.
func (s *Store) Delete(ctx context.Context, key string) error {
	_, err := s.client.DeleteObject(ctx, &s3.DeleteObjectInput{Bucket: aws.String(s.bucket), Key: aws.String(key)})
	if err != nil {
		return s.wrap("delete", key, err)
	}
	return nil
}

// List returns every object whose key starts with prefix, in key order.
func (s *Store) List(ctx context.Context, prefix string) ([]Object, error) {
	var objs []Object
	p := s3.NewListObjectsV2Paginator(s.client, &s3.ListObjectsV2Input{Bucket: aws.String(s.bucket), Prefix: aws.String(prefix)})
	for p.HasMorePages() {
		page, err := p.NextPage(ctx)
		if err != nil {
			return nil, s.wrap("list", prefix, err)
		}
		for _, o := range page.Contents {
			objs = append(objs, Object{Key: aws.ToString(o.Key), Size: aws.ToInt64(o.Size), ETag: aws.ToString(o.ETag), LastModified: aws.ToTime(o.LastModified)})
		}
	}
	return objs, nil
}

// ListVersions returns every version and delete marker of every key that
// starts with prefix, by key, newest first within a key. An unversioned
// bucket answers one version per object, with the id "null" (AWS) or none.
func (s *Store) ListVersions(ctx context.Context, prefix string) ([]Version, error) {
	var vs []Version
	p := s3.NewListObjectVersionsPaginator(s.client, &s3.ListObjectVersionsInput{Bucket: aws.String(s.bucket), Prefix: aws.String(prefix)})
	for p.HasMorePages() {
		page, err := p.NextPage(ctx)
		if err != nil {
			return nil, s.wrap("list versions", prefix, err)
		}
		for _, v := range page.Versions {
			vs = append(vs, Version{Key: aws.ToString(v.Key), VersionID: aws.ToString(v.VersionId), Size: aws.ToInt64(v.Size),
				IsLatest: aws.ToBool(v.IsLatest), LastModified: aws.ToTime(v.LastModified)})
		}
		for _, m := range page.DeleteMarkers {
			vs = append(vs, Version{Key: aws.ToString(m.Key), VersionID: aws.ToString(m.VersionId), IsLatest: aws.ToBool(m.IsLatest),
				DeleteMarker: true, LastModified: aws.ToTime(m.LastModified)})
		}
	}
	slices.SortStableFunc(vs, func(a, b Version) int {
		if c := strings.Compare(a.Key, b.Key); c != 0 {
			return c
		}
		return b.LastModified.Compare(a.LastModified)
	})
	// A version listed twice is one: versitygw repeats the key at a page's
	// boundary in an unversioned bucket (its key marker is inclusive).
	return slices.CompactFunc(vs, func(a, b Version) bool {
		return a.Key == b.Key && a.VersionID == b.VersionID && a.DeleteMarker == b.DeleteMarker
	}), nil
}

// DeleteVersion deletes one version of key for ever (s3:DeleteObjectVersion):
// unlike Delete in a versioned bucket, which only adds a delete marker, the
// version's bytes are gone. Deleting a version already gone succeeds.
func (s *Store) DeleteVersion(ctx context.Context, key, versionID string) error {
	if versionID == "" {
		return fmt.Errorf("s3 delete version %s/%s: no version id", s.bucket, key)
	}
	_, err := s.client.DeleteObject(ctx, &s3.DeleteObjectInput{Bucket: aws.String(s.bucket), Key: aws.String(key), VersionId: aws.String(versionID)})
	if err != nil && !isNotFound(err) {
		return s.wrap("delete version "+versionID, key, err)
	}
	return nil
}

// deleteBatch is DeleteObjects' limit of keys per request.
const deleteBatch = 1000

// DeleteAll deletes each of versions for ever, in batches of a thousand
// (s3:DeleteObject, or s3:DeleteObjectVersion for a version id other than
// "null"): a version without an id, or with "null" (an unversioned
// bucket's), deletes the key's object. It returns how many S3 reports
// deleted; keys it refused are named in the error (at most five).
func (s *Store) DeleteAll(ctx context.Context, versions []Version) (int, error) {
	deleted := 0
	var refused []string
	for start := 0; start < len(versions); start += deleteBatch {
		batch := versions[start:min(start+deleteBatch, len(versions))]
		ids := make([]types.ObjectIdentifier, 0, len(batch))
		for _, v := range batch {
			id := types.ObjectIdentifier{Key: aws.String(v.Key)}
			if v.VersionID != "" && v.VersionID != "null" {
				id.VersionId = aws.String(v.VersionID)
			}
			ids = append(ids, id)
		}
		out, err := s.client.DeleteObjects(ctx, &s3.DeleteObjectsInput{
			Bucket: aws.String(s.bucket), Delete: &types.Delete{Objects: ids, Quiet: aws.Bool(true)},
		})
		if err != nil {
			return deleted, s.wrap("delete objects", batch[0].Key, err)
		}
		deleted += len(batch) - len(out.Errors)
		for _, e := range out.Errors {
			if len(refused) < 5 {
				refused = append(refused, fmt.Sprintf("%s: %s", aws.ToString(e.Key), aws.ToString(e.Code)))
			}
		}
	}
	if len(refused) > 0 {
		return deleted, fmt.Errorf("s3 delete objects %s: %d of %d refused, among them %s", s.bucket, len(versions)-deleted, len(versions), strings.Join(refused, ", "))
	}
	return deleted, nil
}

func (s *Store) wrap(op, key string, err error) error {
	if isNotFound(err) {
		err = fmt.Errorf("%w: %w", ErrNotFound, err)
	}
	return fmt.Errorf("s3 %s %s/%s: %w", op, s.bucket, key, err)
}

func isNotFound(err error) bool {
	var nsk *types.NoSuchKey
	var nf *types.NotFound
	var nsb *types.NoSuchBucket
	if errors.As(err, &nsk) || errors.As(err, &nf) || errors.As(err, &nsb) {
		return true
	}
	var re *smithyhttp.ResponseError
	return errors.As(err, &re) && re.HTTPStatusCode() == http.StatusNotFound
}

// IsUnavailable reports whether err means the store could not be reached or
// did not serve the request (connection refused or reset, timeout, 5xx,
// throttling), after the SDK's own retries: a failure that waiting can cure,
// unlike a refusal such as AccessDenied or NoSuchBucket, which needs a fix.
func IsUnavailable(err error) bool {
	if err == nil || errors.Is(err, context.Canceled) {
		return false
	}
	if errors.Is(err, context.DeadlineExceeded) {
		return true // S3 did not answer in the time we had
	}
	// A request that never got an answer (refused, reset, timed out) comes
	// wrapped in a ResponseError with status 0, so this goes first.
	var sendErr *smithyhttp.RequestSendError
	var netErr net.Error
	if errors.As(err, &sendErr) || errors.As(err, &netErr) {
		return true
	}
	var re *smithyhttp.ResponseError
	if errors.As(err, &re) && re.HTTPStatusCode() != 0 {
		sc := re.HTTPStatusCode()
		return sc >= 500 || sc == http.StatusTooManyRequests || sc == http.StatusRequestTimeout
	}
	var apiErr smithy.APIError
	if errors.As(err, &apiErr) {
		switch apiErr.ErrorCode() {
		case "SlowDown", "ServiceUnavailable", "InternalError", "RequestTimeout", "Throttling", "ThrottlingException":
			return true
		}
		return false
	}
	// A response cut short (the server died mid-body) surfaces as a bare
	// EOF or reset from the body reader.
	return errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF) ||
		strings.Contains(err.Error(), "connection reset") || strings.Contains(err.Error(), "connection refused")
}
