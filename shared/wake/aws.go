package wake

import (
	"context"
	"fmt"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/lambda"
	"github.com/aws/aws-sdk-go-v2/service/lambda/types"

	"github.com/webhook-inbox/webhook-inbox/shared/blobstore"
)

// Open returns a Waker over AWS: the Lambda client of the SDK's default
// configuration (AWS_ENDPOINT_URL_LAMBDA points it elsewhere, as the local
// stack does) and the control bucket's S3 client, built only when the
// mode or the bucket needs them.
func Open(ctx context.Context, cfg Config) (*Waker, error) {
	if err := cfg.check(); err != nil {
		return nil, err
	}
	var (
		inv  Invoker
		objs Putter
	)
	if cfg.Mode == ModeInvoke {
		var opts []func(*config.LoadOptions) error
		if cfg.S3.Region != "" {
			opts = append(opts, config.WithRegion(cfg.S3.Region))
		}
		awsCfg, err := config.LoadDefaultConfig(ctx, opts...)
		if err != nil {
			return nil, fmt.Errorf("wake: load AWS configuration: %w", err)
		}
		inv = lambdaInvoker{lambda.NewFromConfig(awsCfg)}
	}
	if cfg.Bucket != "" {
		s3cfg := cfg.S3
		s3cfg.Bucket = cfg.Bucket
		store, err := blobstore.Open(ctx, s3cfg)
		if err != nil {
			return nil, fmt.Errorf("wake: control bucket: %w", err)
		}
		objs = markers{store}
	}
	return New(cfg, inv, objs)
}

// lambdaInvoker sends Event (asynchronous) invocations: Lambda queues the
// event and answers 202 at once, and retries a failed invocation twice
// (https://docs.aws.amazon.com/lambda/latest/dg/invocation-async.html).
type lambdaInvoker struct{ c *lambda.Client }

func (l lambdaInvoker) InvokeAsync(ctx context.Context, function string, payload []byte) error {
	_, err := l.c.Invoke(ctx, &lambda.InvokeInput{
		FunctionName:   aws.String(function),
		InvocationType: types.InvocationTypeEvent,
		Payload:        payload,
	})
	return err
}

// markers writes empty objects to the control bucket.
type markers struct{ s *blobstore.Store }

func (m markers) PutMarker(ctx context.Context, key string) error {
	_, err := m.s.Put(ctx, key, nil, "application/octet-stream")
	return err
}
